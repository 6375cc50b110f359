"""A placement body's ``prompt`` or ``messages`` as the engine's own token ids, or why not (SPEC 16.3).

``read_prompt`` answers a ``PromptIds``: the packed ids (SPEC 15.1's packing)
and the tokenizer that made them, or ``error`` naming why the prompt cannot
be keyed (``no_tokenizer``, ``template_error``, ``template_timeout``,
``non_text``), in which case placement goes on by load alone. It never
raises for a valid body: a template's failure is the template's, not the
request's.
"""

from __future__ import annotations

import dataclasses

from django.conf import settings

from proxy_app.tokenizers import chat
from proxy_app.tokenizers.loaded import NoTemplate
from proxy_app.tokenizers.registry import TOKENIZERS

NO_TOKENIZER, TEMPLATE_ERROR, TEMPLATE_TIMEOUT, NON_TEXT = "no_tokenizer", "template_error", "template_timeout", \
    "non_text"


@dataclasses.dataclass(frozen=True)
class PromptIds:
    ids: bytes | None = None  # 4 bytes an id, little-endian
    tokenizer: dict | None = None  # the answer's ``tokenizer``: {"source", "sha256"}; null for ids sent as ids
    error: str | None = None
    detail: str | None = None  # the error's own words, for logs and the admin

    @property
    def tokens(self):
        return None if self.ids is None else len(self.ids) // 4


def has_text_prompt(data):
    """Whether the body carries its prompt as ``prompt`` or ``messages`` (SPEC 16.3's forms)."""
    return data.get("prompt") is not None or data.get("messages") is not None


def read_prompt(data, model, registry=TOKENIZERS):
    """The engine's ids of the body's ``prompt`` or ``messages`` for ``model`` (validated data)."""
    prompt = data.get("prompt")
    if isinstance(prompt, bytes):  # token ids, as OpenAI's completions allow: no tokenizer needed
        return PromptIds(ids=prompt)
    tokenizer, why = registry.lookup(model)
    if tokenizer is None:
        return PromptIds(error=NO_TOKENIZER, detail=why)
    special = data.get("add_special_tokens")
    try:
        if prompt is not None:
            return PromptIds(ids=tokenizer.prompt_ids(prompt, special is not False), tokenizer=tokenizer.answer)
        ids = tokenizer.chat_ids(data, settings.FLEETWATCH_TEMPLATE_TIMEOUT_MS / 1000.0, special is True)
    except chat.NonText as part:
        return PromptIds(tokenizer=tokenizer.answer, error=NON_TEXT, detail=f"a {part.args[0]!r} part")
    except chat.TemplateTimeout:
        return PromptIds(tokenizer=tokenizer.answer, error=TEMPLATE_TIMEOUT,
                         detail=f"over {settings.FLEETWATCH_TEMPLATE_TIMEOUT_MS:g} ms")
    except chat.TemplateFailure as failure:
        return PromptIds(tokenizer=tokenizer.answer, error=TEMPLATE_ERROR, detail=str(failure))
    except NoTemplate:
        return PromptIds(tokenizer=tokenizer.answer, error=TEMPLATE_ERROR, detail="the tokenizer has no chat template")
    except Exception as error:  # noqa: BLE001 - the tokenizers library raises plain Exceptions on some texts
        return PromptIds(tokenizer=tokenizer.answer, error=NO_TOKENIZER, detail=f"the tokenizer failed: {error}")
    return PromptIds(ids=ids, tokenizer=tokenizer.answer)
