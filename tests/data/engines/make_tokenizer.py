"""Make the tiny model's tokenizer (``tests/data/engines/tiny-llama/``): the files the tests ship beside its
``config.json`` so that vLLM tokenizes text and renders chat offline, and the Proxy can be held to it (SPEC 16).

A byte-level BPE of 512 ids (the tiny model's vocabulary), trained on a fixed corpus so a run always makes the
same files, with the special tokens ``<unk>`` ``<s>`` ``</s>`` ``<|im_start|>`` ``<|im_end|>`` (ids 0-4, so
``<s>`` and ``</s>`` are the config's ``bos_token_id`` 1 and ``eos_token_id`` 2), ``<s>`` added in front of a
plain prompt, and a ChatML-like chat template that renders ``tools``. Run it again only to change them:

    .venv/bin/python tests/data/engines/make_tokenizer.py
"""

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = Path(__file__).resolve().parent / "tiny-llama"
VOCABULARY = 512
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "You may call these tools:\n{{ tools | tojson }}<|im_end|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    "You are a helpful assistant. Answer the question in one short paragraph.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps in the sun.",
    "Fleetwatch places each request on the instance that holds its prefix in the KV cache.",
    "def main():\n    print('hello, world')\n    return 0\n",
    "Summarise the following document for an engineer who has five minutes.",
    "Le serveur répond en français, et la réponse est très courte.",
    "Die Antwort ist kurz und klar. Über alles!",
    "user assistant system tool function arguments name description parameters type object string",
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {}}}",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2026 3.14159",
]


def build():
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS * 20, trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def config():
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False,
        "model_max_length": 16384,
        "chat_template": CHAT_TEMPLATE,
    }


def main():
    tokenizer = build()
    assert tokenizer.get_vocab_size() == VOCABULARY, tokenizer.get_vocab_size()
    assert [tokenizer.token_to_id(token) for token in SPECIAL] == list(range(len(SPECIAL)))
    tokenizer.save(str(HERE / "tokenizer.json"))
    (HERE / "tokenizer_config.json").write_text(json.dumps(config(), indent=2) + "\n")


if __name__ == "__main__":
    main()
