"""Text and chat prompts in one process (issue 43): what the Proxy adds to the tokenizer's own encode time, and what
the segment cache holds.

    .venv/bin/python -m bench.text_prompts [--samples 300]

With the tests' tiny tokenizer (tests/data/engines/tiny-llama), taking turns sample by sample:

- a cold ~4,000-token text prompt (a text never seen): the ``tokenizers`` library's own
  ``encode(text)``, against the Proxy's path for a ``prompt`` body (the body checked, the ids read through the
  segment cache, the keys): target ≤ encode + 0.5 ms;
- a chat whose ~4,000-token system prompt was seen before, with a new ~100-token user turn: the Proxy's path
  against encoding the whole render;
- the segment cache: bytes per entry as ``tracemalloc`` measures them against the cache's own accounting, and
  what the default bound (``FLEETWATCH_TOKENIZER_CACHE_MB``, 64) holds.
"""

import argparse
import json
import os
import statistics
import time
import tracemalloc

from bench.prefix_index import MODEL, SYSTEM_WORDS, TOKENIZER_DIR, TURN_WORDS, text_of


def per_call_ms(calls):
    """Median milliseconds of each callable, taking turns call by call (so a busy moment hits all alike)."""
    times = [[] for _ in calls]
    for n in range(len(calls[0][1])):
        for index, (function, arguments) in enumerate(calls):
            started = time.perf_counter()
            function(arguments[n])
            times[index].append((time.perf_counter() - started) * 1000)
    return [statistics.median(column) for column in times]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ["FLEETWATCH_TOKENIZERS"] = json.dumps({MODEL: str(TOKENIZER_DIR)})
    import django

    django.setup()
    from agent.prefix_keys import prompt_keys
    from proxy_app.api.serializers import PLACEMENT_BODY
    from proxy_app.tokenizers.prompts import read_prompt
    from proxy_app.tokenizers.registry import TOKENIZERS

    tokenizer = TOKENIZERS.lookup(MODEL)[0].tokenizer

    def proxy_path(body):
        data = PLACEMENT_BODY(body)
        prompt = read_prompt(data, MODEL)
        assert prompt.error is None, prompt
        return prompt_keys(MODEL, prompt.ids[:-4], 16)

    texts = [text_of(2_000_000 + n, SYSTEM_WORDS) for n in range(2 * args.samples)]
    cold = per_call_ms([(lambda text: tokenizer.encode(text), texts[:args.samples]),
                        (lambda text: proxy_path({"model": MODEL, "prompt": text}), texts[args.samples:])])
    tokens = len(tokenizer.encode(texts[0]).ids)
    print(f"cold {tokens}-token text prompt: tokenizers' encode {cold[0]:.3f} ms · the Proxy's path {cold[1]:.3f} ms "
          f"· added {cold[1] - cold[0]:.3f} ms (target ≤ 0.5)")

    system = text_of(7, SYSTEM_WORDS)
    chats = [{"model": MODEL, "messages": [{"role": "system", "content": system},
                                           {"role": "user", "content": text_of(3_000_000 + n, TURN_WORDS)}]}
             for n in range(args.samples)]
    loaded = TOKENIZERS.lookup(MODEL)[0]
    renders = [loaded.render({**chat, "add_generation_prompt": True, "continue_final_message": False}, 1.0)
               for chat in chats]
    proxy_path(chats[0])  # the system prompt seen before
    warm = per_call_ms([(lambda text: tokenizer.encode(text, add_special_tokens=False), renders),
                        (proxy_path, chats)])
    print(f"chat, {len(tokenizer.encode(renders[0]).ids)} tokens, its system prompt seen before: the whole render "
          f"encoded {warm[0]:.3f} ms · the Proxy's path (render, cached segments, the new turn, keys) {warm[1]:.3f} ms")

    cache = TOKENIZERS.cache
    cache.clear()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    entries = 200
    for n in range(entries):
        loaded.prompt_ids(text_of(4_000_000 + n, SYSTEM_WORDS), special=False)
    after = tracemalloc.take_snapshot()
    measured = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    tracemalloc.stop()
    print(f"segment cache: {entries} segments of ~{SYSTEM_WORDS * 6} characters: accounted "
          f"{cache.bytes / entries:,.0f} bytes each, measured {measured / entries:,.0f}; the default bound of "
          f"{cache.max_bytes / 2**20:.0f} MiB holds about {cache.max_bytes // (cache.bytes / entries):,.0f} of them "
          f"per process")


if __name__ == "__main__":
    main()
