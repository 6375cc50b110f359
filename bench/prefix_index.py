"""The pool prefix index under load (issue 32): the parts ``bench/placement.py --prefix`` adds.

The pool's instances each hold ``--prefix-keys`` keys: the first blocks of
``TENANTS_PER_INSTANCE`` tenants' 4,096-token system prompts (SPEC 15.1 keys of
the benchmark's model), so each tenant's prefix is cached on a few instances
of the pool, as cache-aware routing leaves it. While snapshots arrive, a
second process posts ``--prefix-rate`` prefix-block bodies a second (8 keys
stored, the 8 it stored last time for that instance evicted), and placement
is asked with a tenant's whole 4,096-token prompt as token ids.
"""

import http.client
import json
import random
import time
from pathlib import Path

from agent.prefix_keys import prompt_keys

MODEL = "meta-llama/Llama-3.1-70B-Instruct"  # bench.common.realistic_engine's
PROMPT_TOKENS = 4096
BLOCK_TOKENS = 16
TENANTS_PER_INSTANCE = 5
KV_EVENTS_OK = {"status": "ok", "error": None, "resident_blocks": 1000, "events_total": 1, "gaps_total": 0,
                "last_event_age_ms": 50, "block_tokens": BLOCK_TOKENS}


def tenant_tokens(tenant):
    return [(tenant * 1_000_003 + i * 7919) % 50_000 for i in range(PROMPT_TOKENS)]


def tenants_of(instances):
    """One tenant per 25 instances of ``TENANTS_PER_INSTANCE`` each: each prefix is held by ~25 instances."""
    return max(1, instances * TENANTS_PER_INSTANCE // 25)


def placement_bodies(instances, as_keys=False, count=50):
    """Placement bodies with the whole 4,096-token prompt of one of ``count`` tenants each, as token ids or as
    its block keys (what a router computing SPEC 15.1 itself sends)."""
    bodies = []
    for tenant in range(min(count, tenants_of(instances))):
        tokens = tenant_tokens(tenant)
        prompt = {"prompt_block_keys": prompt_keys(MODEL, tokens, BLOCK_TOKENS)} if as_keys else \
            {"prompt_token_ids": tokens}
        bodies.append(json.dumps({"model": MODEL, "count": 3, **prompt}))
    return bodies


# Text and chat (issue 43): each tenant's system prompt as text of about PROMPT_TOKENS tokens of the tests' tiny
# tokenizer (the Proxy is given it for MODEL), then a new user turn of about 100 tokens per request.
TOKENIZER_DIR = Path(__file__).resolve().parent.parent / "tests" / "data" / "engines" / "tiny-llama"
WORDS = ("cache", "prefix", "engine", "token", "placement", "tenant", "system", "prompt", "answer", "question",
         "fleet", "instance", "héllo", "wörld", "42", "node", "queue", "model", "route", "window")


def text_of(seed, words):
    """``words`` words drawn from ``seed``: about 3.2 tokens a word with the tiny tokenizer."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


SYSTEM_WORDS, TURN_WORDS = 1_250, 31  # about 4,000 and 100 tokens


def chat_bodies(instances, count=50, turns=40):
    """Chat bodies: one of ``count`` tenants' system prompts (seen again and again) and a user turn new to each
    body (``turns`` bodies per tenant), as a gateway forwards a client's chat completion."""
    bodies = []
    for turn in range(turns):
        for tenant in range(min(count, tenants_of(instances))):
            messages = [{"role": "system", "content": text_of(tenant, SYSTEM_WORDS)},
                        {"role": "user", "content": text_of(10_000 + turn * count + tenant, TURN_WORDS)}]
            bodies.append(json.dumps({"model": MODEL, "messages": messages, "max_tokens": 64, "stream": True}))
    return bodies


def cold_text_bodies(count):
    """``count`` completion bodies, each a 4,000-token text prompt no other body shares (nothing to reuse)."""
    return [json.dumps({"model": MODEL, "prompt": text_of(1_000_000 + n, SYSTEM_WORDS), "max_tokens": 16})
            for n in range(count)]


SEED = """
import sys, time
import numpy as np
import django
django.setup()
from django.db import connection
from agent.prefix_keys import prompt_keys
from bench.prefix_index import MODEL, TENANTS_PER_INSTANCE, tenant_tokens, tenants_of
from proxy_app.models import InstanceResource, PrefixBlock, PrefixEngine
instances, per_instance = int(sys.argv[1]), int(sys.argv[2])
now = time.time()
tenants = tenants_of(instances)
blocks = per_instance // TENANTS_PER_INSTANCE
chains = [np.array(prompt_keys(MODEL, tenant_tokens(t), 16)[:blocks], dtype=np.int64) for t in range(tenants)]
PrefixEngine.objects.bulk_create([PrefixEngine(instance_id=f"bench-{i}", engine="e0", epoch=1, seq=0,
                                               blocks=blocks * TENANTS_PER_INSTANCE, changed_at=now)
                                  for i in range(instances)], batch_size=1000)
InstanceResource.objects.update(kv_events_ok_count=1)
slot_of = dict(PrefixEngine.objects.values_list("instance_id", "id"))
table = connection.ops.quote_name(PrefixBlock._meta.db_table)
started = time.perf_counter()
with connection.cursor() as cursor:
    for i in range(instances):
        keys = np.unique(np.concatenate([chains[(i * TENANTS_PER_INSTANCE + j) % tenants]
                                         for j in range(TENANTS_PER_INSTANCE)]))
        instance, slot = f"bench-{i}", slot_of[f"bench-{i}"]
        if connection.vendor == "postgresql":
            cursor.execute(f"INSERT INTO {table} (instance_id, slot, key) SELECT %s, %s, unnest(%s::bigint[])",
                           [instance, slot, keys.tolist()])
        else:
            cursor.executemany(f"INSERT INTO {table} (instance_id, slot, key) VALUES (%s, %s, %s)",
                               [(instance, slot, key) for key in keys.tolist()])
print(f"{PrefixBlock.objects.count()} keys seeded in {time.perf_counter() - started:.0f} s")
"""

MEMORY = """
import os, time, tracemalloc
import psutil
import django
django.setup()
from proxy_app.prefix.keeper import PREFIX
rss = psutil.Process(os.getpid()).memory_info().rss
tracemalloc.start()
started = time.perf_counter()
PREFIX.refresh(time.time())
took = time.perf_counter() - started
current, peak = tracemalloc.get_traced_memory()
pairs = len(PREFIX.index)
grown = psutil.Process(os.getpid()).memory_info().rss - rss
print(f"{pairs} keys: rebuilt in {took:.1f} s; the index holds {PREFIX.nbytes() / pairs:.1f} bytes a key "
      f"({PREFIX.nbytes() / 2**20:.0f} MiB; {PREFIX.nbytes() / pairs:.1f} MB per million keys); "
      f"traced {current / pairs:.1f} bytes a key after, {peak / pairs:.1f} at the rebuild's peak; "
      f"RSS grew {grown / pairs:.1f} bytes a key")
"""


def updated_keys(sent):
    """The 8 keys the ``sent``-th body stores (the same body ``instances`` later evicts them)."""
    return [(sent * 8 + k) * 2654435761 % (2**62) for k in range(8)]


def updates(url, token, instances, rate, stop, sent_so_far=None):
    """``rate`` prefix-block bodies a second, round robin: each stores 8 new keys and evicts its previous 8.
    ``sent_so_far`` (a ``multiprocessing.Value``): where an earlier run left off, updated as bodies are sent, so
    a next run against another server of the same database goes on with each stream's next seq."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    first = sent = sent_so_far.value if sent_so_far is not None else 0
    started = time.monotonic()
    while not stop.is_set():
        instance = f"bench-{sent % instances}"
        body = {"instance_id": instance, "engine": "e0", "epoch": 1, "seq": sent // instances + 1,
                "block_tokens": BLOCK_TOKENS, "added": updated_keys(sent),
                "removed": updated_keys(sent - instances) if sent >= instances else []}
        connection.request("POST", "/v1/instance/prefix_blocks", json.dumps(body), headers)
        answer = json.loads(connection.getresponse().read())
        if answer.get("resync"):
            raise SystemExit(f"unexpected resync for {instance}: {answer}")
        sent += 1
        if sent_so_far is not None:
            sent_so_far.value = sent
        delay = started + (sent - first) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def expected_hits(instances, per_instance):
    """How many blocks of tenant 0's prompt the instances holding it have cached."""
    return per_instance // TENANTS_PER_INSTANCE, len(prompt_keys(MODEL, tenant_tokens(0), BLOCK_TOKENS))


def memory_at_scale(instances=10_000, per_instance=1000):
    """The index alone at full size, no database: bytes a key, a lookup, a merge (``python -m bench.prefix_index``)."""
    import tracemalloc

    import numpy as np

    from proxy_app.prefix.index import PrefixIndex

    tenants = tenants_of(instances)
    blocks = per_instance // TENANTS_PER_INSTANCE
    started = time.perf_counter()
    chains = [np.array(prompt_keys(MODEL, tenant_tokens(t), BLOCK_TOKENS)[:blocks], np.int64) for t in range(tenants)]
    print(f"{tenants} tenants' prompts keyed in {time.perf_counter() - started:.1f} s")
    slots = np.repeat(np.arange(instances, dtype=np.int32), blocks * TENANTS_PER_INSTANCE)
    keys = np.concatenate([chains[(i * TENANTS_PER_INSTANCE + j) % tenants]
                           for i in range(instances) for j in range(TENANTS_PER_INSTANCE)])
    tracemalloc.start()
    started = time.perf_counter()
    index = PrefixIndex()
    index.load([(i, f"bench-{i}") for i in range(instances)], slots, keys)
    built = time.perf_counter() - started
    del slots, keys
    current, peak = tracemalloc.get_traced_memory()
    pairs = len(index)
    print(f"{pairs:,} keys over {instances:,} instances: built in {built:.1f} s; nbytes {index.nbytes() / pairs:.1f} "
          f"bytes a key; traced {current / pairs:.1f} bytes a key held, {peak / pairs:.1f} at the build's peak")
    prompt = prompt_keys(MODEL, tenant_tokens(0), BLOCK_TOKENS)
    for label in ("columns only", "with a delta of 60,000 changes"):
        runs = 200
        started = time.perf_counter()
        for _ in range(runs):
            found = index.hits(prompt)
        print(f"  a 4,096-token prompt's lookup ({label}): {(time.perf_counter() - started) / runs * 1000:.3f} ms, "
              f"{len(found)} instances hold {max(found.values())} of its {len(prompt)} blocks")
        for n in range(7_500):  # 7,500 bodies of 8 stored + 8 evicted keys
            index.apply(n % instances, f"bench-{n % instances}", added=[n * 8 + k + 1 for k in range(8)],
                        removed=[(n - instances) * 8 + k + 1 for k in range(8)] if n >= instances else ())
    tracemalloc.reset_peak()
    current, _ = tracemalloc.get_traced_memory()
    print(f"  with the delta: traced {current / len(index):.1f} bytes a key")
    started = time.perf_counter()
    index.merge()
    _, peak = tracemalloc.get_traced_memory()
    print(f"  a merge: {(time.perf_counter() - started) * 1000:.0f} ms, peak {peak / len(index):.1f} bytes a key")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=memory_at_scale.__doc__)
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--prefix-keys", type=int, default=1000)
    args = parser.parse_args()
    memory_at_scale(args.instances, args.prefix_keys)
