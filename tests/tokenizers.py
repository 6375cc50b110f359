"""The tests' tiny tokenizer (``tests/data/engines/tiny-llama/``, made by ``make_tokenizer.py``), loaded as the Proxy
loads it, with ids as plain lists for assertions."""

from array import array
from pathlib import Path

from proxy_app.tokenizers.loaded import FILE_NAMES, ModelTokenizer, directory_files
from proxy_app.tokenizers.segments import SegmentCache

TINY_MODEL_DIR = Path(__file__).resolve().parent / "data" / "engines" / "tiny-llama"
TIMEOUT_S = 5.0  # ample: these renders are not under test for their bound


def ids_of(packed):
    return array("I", packed).tolist()


class TinyTokenizer:
    """``ModelTokenizer`` of the tiny model's files, answering lists (and for chat the body's defaults)."""

    def __init__(self, cache_bytes=64 << 20, directory=TINY_MODEL_DIR):
        self.loaded = ModelTokenizer(directory_files(directory), "operator", SegmentCache(cache_bytes))
        self.sha256 = self.loaded.sha256

    @staticmethod
    def chat_body(body):
        return {"add_generation_prompt": True, "continue_final_message": False, **body}

    def prompt_ids(self, text):
        return ids_of(self.loaded.prompt_ids(text))

    def chat_ids(self, body):
        return ids_of(self.loaded.chat_ids(self.chat_body(body), TIMEOUT_S))

    def render(self, body):
        return self.loaded.render(self.chat_body(body), TIMEOUT_S)


def tiny_tokenizer(**kwargs):
    return TinyTokenizer(**kwargs)


__all__ = ["FILE_NAMES", "TINY_MODEL_DIR", "TinyTokenizer", "ids_of", "tiny_tokenizer"]
