"""The files a tokenizer is made of (SPEC 16.2), and their SHA-256 digests.

Only these names are taken from an agent; anything else in a model's
directory (weights, configs, code) is never asked for.
"""

import hashlib
import re

TOKENIZER_JSON = "tokenizer.json"
# tokenizer.json (the ``tokenizers`` library's), tokenizer_config.json (special tokens, add_bos/eos, the chat
# template), chat_template.jinja or .json (win over the config's template), special_tokens_map.json.
NAMES = (TOKENIZER_JSON, "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
         "special_tokens_map.json")
# SPEC 16.2: one file at most 64 MiB (a large vocabulary's tokenizer.json is ~10-30 MB).
MAX_FILE_BYTES = 64 * 1024 * 1024
DIGEST_LENGTH = 64
_DIGEST = re.compile(r"[0-9a-f]{64}")


def is_digest(text) -> bool:
    """A SHA-256 digest as this API writes it: 64 lowercase hexadecimal characters."""
    return isinstance(text, str) and _DIGEST.fullmatch(text) is not None


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
