"""One model's tokenizer as the engine uses it (SPEC 16.2, 16.3): its ``tokenizers`` model, its special tokens and
its chat template, loaded from the Hugging Face files of the model's directory.

``ModelTokenizer.prompt_ids(text)`` gives a completion's ``prompt`` as the
engine tokenizes it (with the special tokens the tokenizer adds: its
post-processor, ``<s>`` in front for a Llama-like one), ``chat_ids(body)`` a
chat as the engine renders and tokenizes it (the template, then no special
tokens added). Both go through the segment cache (``segments``) where the
tokenizer allows it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tokenizers import Tokenizer

from agent.prefix_keys import token_bytes
from proxy_app.tokenizers import chat
from proxy_app.tokenizers.files import NAMES as FILE_NAMES
from proxy_app.tokenizers.files import TOKENIZER_JSON
from proxy_app.tokenizers.segments import Segmenter

CONFIG_JSON, TEMPLATE_JINJA, TEMPLATE_JSON, SPECIAL_MAP_JSON = FILE_NAMES[1:]
# The special tokens Hugging Face hands a chat template by name.
SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class LoadError(Exception):
    """The files do not make a tokenizer; the text says why (shown in the admin)."""


class NoTemplate(Exception):
    """The tokenizer has no chat template."""


def _json(files, name):
    data = files.get(name)
    if data is None:
        return {}
    try:
        value = json.loads(data)
    except ValueError as error:
        raise LoadError(f"{name} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise LoadError(f"{name} is not a JSON object")
    return value


def _token_text(value):
    """A special token as a config names it: a string, or an added token's object with its ``content``."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def template_source(files, config):
    """The chat template: ``chat_template.jinja``, else ``chat_template.json``'s, else the config's (the default one
    of a list of named templates); None without one."""
    if files.get(TEMPLATE_JINJA) is not None:
        return files[TEMPLATE_JINJA].decode("utf-8", "replace")
    for source in (_json(files, TEMPLATE_JSON).get("chat_template"), config.get("chat_template")):
        if isinstance(source, list):
            named = {item.get("name"): item.get("template") for item in source if isinstance(item, dict)}
            source = named.get("default")
        if isinstance(source, str):
            return source
    return None


def directory_files(path):
    """The tokenizer files of a directory, by name (those present)."""
    folder = Path(path)
    out = {}
    for name in FILE_NAMES:
        try:
            out[name] = (folder / name).read_bytes()
        except FileNotFoundError:
            continue
        except OSError as error:
            raise LoadError(f"{folder / name}: {error}") from None
    return out


class ModelTokenizer:
    """A loaded tokenizer: ``source`` (``operator`` or ``agent``) and ``sha256`` (of ``tokenizer.json``) say which."""

    def __init__(self, files, source, cache):
        if files.get(TOKENIZER_JSON) is None:
            raise LoadError("no tokenizer.json")
        self.source = source
        self.sha256 = hashlib.sha256(files[TOKENIZER_JSON]).hexdigest()
        try:
            self.tokenizer = Tokenizer.from_str(files[TOKENIZER_JSON].decode("utf-8"))
        except Exception as error:  # noqa: BLE001 - the library raises its own types, and UnicodeDecodeError
            raise LoadError(f"tokenizer.json does not load: {error}") from None
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        config = _json(files, CONFIG_JSON)
        special_map = _json(files, SPECIAL_MAP_JSON)
        self.special_tokens = {name: _token_text(config.get(name, special_map.get(name))) for name in SPECIAL_NAMES}
        self.special_tokens = {name: text for name, text in self.special_tokens.items() if text is not None}
        self.template_text = template_source(files, config)
        self.template_error = None
        self.template = None
        if self.template_text is not None:
            try:
                self.template = chat.compile_template(self.template_text)
            except chat.TemplateFailure as failure:
                self.template_error = str(failure)
        self.keeps_parts = self.template_text is not None and chat.takes_parts(self.template_text)
        # Keyed by the files that decide the ids, so the same tokenizer offered for two models shares its entries.
        digest = hashlib.sha256(b"".join(files.get(name) or b"" for name in FILE_NAMES)).digest()[:16]
        try:
            self.segmenter = Segmenter.of(self.tokenizer, digest, cache)
            self.around = self._around()
        except Exception as error:  # noqa: BLE001 - the library raises plain Exceptions (an unknown word, no unk)
            raise LoadError(f"the tokenizer fails on sample text: {error}") from None

    @property
    def answer(self):
        """The answer's ``tokenizer``."""
        return {"source": self.source, "sha256": self.sha256}

    def _around(self):
        """``(before, after)``: the ids the tokenizer adds around any text, when that is all it adds (its
        post-processor on one sequence); None when a text must be tokenized whole with them."""
        first, second = "Hello world", "héllo\nwörld 42"
        plain = self.tokenizer.encode(first, add_special_tokens=False).ids
        full = self.tokenizer.encode(first, add_special_tokens=True).ids
        for start in range(len(full) - len(plain) + 1):
            if full[start:start + len(plain)] == plain:
                before, after = full[:start], full[start + len(plain):]
                check = self.tokenizer.encode(second, add_special_tokens=True).ids
                if check == before + self.tokenizer.encode(second, add_special_tokens=False).ids + after:
                    return token_bytes(before), token_bytes(after)
                return None
        return None

    def _text_ids(self, text):
        if self.segmenter is None:
            return token_bytes(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return self.segmenter.ids(text)

    def prompt_ids(self, text, special=True):
        """A completion's prompt text as the engine tokenizes it, packed (4 bytes an id): with the special tokens the
        tokenizer adds around a text (``special``, vLLM's ``add_special_tokens``, true by default for a prompt)."""
        if not special:
            return self._text_ids(text)
        if self.around is None:
            return token_bytes(self.tokenizer.encode(text, add_special_tokens=True).ids)
        before, after = self.around
        return before + self._text_ids(text) + after

    def render(self, data, timeout_s):
        """A chat body (``messages`` and its options) rendered by the template; ``chat.NonText`` for a part that is not
        text, ``chat.TemplateTimeout`` or ``chat.TemplateFailure`` as the render ends, ``NoTemplate`` without one."""
        if self.template is None:
            if self.template_error is not None:
                raise chat.TemplateFailure(self.template_error)
            raise NoTemplate
        messages = chat.conversation(data["messages"], self.keeps_parts)
        variables = {**self.special_tokens, **(data.get("chat_template_kwargs") or {}), "messages": messages,
                     "tools": data.get("tools"), "documents": data.get("documents"),
                     "add_generation_prompt": data["add_generation_prompt"]}
        rendered = chat.render(self.template, variables, timeout_s)
        if data["continue_final_message"]:
            rendered = chat.cut_after_final(rendered, messages)
        return rendered

    def chat_ids(self, data, timeout_s, special=False):
        """A chat body as the engine renders and tokenizes it, packed: no special tokens added unless ``special``
        (the template writes them itself)."""
        return self.prompt_ids(self.render(data, timeout_s), special)
