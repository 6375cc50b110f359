"""A model's chat template rendered as the engine renders it (SPEC 16.3), and never for longer than allowed (16.2).

The environment is the one Hugging Face gives a template (and vLLM with it):
Jinja2's immutable sandbox with ``trim_blocks`` and ``lstrip_blocks``, the
``loopcontrols`` extension, a ``{% generation %}`` block that only renders its
body, ``tojson`` as ``json.dumps`` (not Jinja's HTML-safe one),
``raise_exception`` and ``strftime_now``; the variables are ``messages``,
``tools``, ``documents``, ``add_generation_prompt``, the tokenizer's special
tokens (``bos_token`` …) and the body's ``chat_template_kwargs``.

A template is code someone else wrote, so a render is bounded:

- in time: a trace function on the rendering thread, only while it renders,
  raises ``TemplateTimeout`` at the first line of template code past the
  deadline (``FLEETWATCH_TEMPLATE_TIMEOUT_MS``, 50 ms), so a loop that never
  ends costs that long and no thread is left behind;
- in size: the output is generated piece by piece and refused past
  ``MAX_OUTPUT_CHARS``, and ``*`` and ``**`` are refused where their result
  would pass it (the sandbox's own ``range`` stops at 100,000 items).
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import datetime

from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

# A rendered chat is tokenized into at most 131,072 ids; a few characters an id is plenty.
MAX_OUTPUT_CHARS = 4 * 1024 * 1024
TEMPLATE_FILENAME = "<chat template>"
# What a message of the "string" content format keeps besides role and content (vLLM passes these through).
MESSAGE_KEYS = ("name", "tool_calls", "tool_call_id", "reasoning_content")
# A template that loops over a message's content takes the parts as they are ("openai" content format);
# any other gets the text parts joined by newlines ("string"), as vLLM decides for the template.
OPENAI_CONTENT_LOOP = re.compile(r"\{%-?\s*for\s+\w+\s+in\s+\w+\s*(?:\[\s*['\"]content['\"]\s*\]|\.content)\b")


class TemplateTimeout(Exception):
    """The render ran past its deadline."""


class TemplateFailure(Exception):
    """The template raised, or its output would pass the size bound."""


class GenerationBlock(Extension):
    """``{% generation %}…{% endgeneration %}``: marks the assistant's part for training; renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def strftime_now(format_):
    return datetime.now().strftime(format_)


class ChatEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox a chat template runs in, with the arithmetic that could blow up memory checked first."""

    intercepted_binops = frozenset(["*", "**"])

    def __init__(self):
        super().__init__(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, GenerationBlock])
        self.filters["tojson"] = tojson
        self.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)

    def call_binop(self, context, operator, left, right):
        if operator == "**" and isinstance(right, int) and abs(right) > 64:
            raise TemplateFailure("an exponent over 64")
        if operator == "*":
            for text, times in ((left, right), (right, left)):
                if isinstance(text, (str, list, tuple)) and isinstance(times, int) \
                        and len(text) * times > MAX_OUTPUT_CHARS:
                    raise TemplateFailure(f"a repetition over {MAX_OUTPUT_CHARS} items")
        return super().call_binop(context, operator, left, right)


ENVIRONMENT = ChatEnvironment()


def compile_template(source):
    """The compiled template of ``source``; ``TemplateFailure`` when it does not compile."""
    try:
        code = ENVIRONMENT.compile(source, filename=TEMPLATE_FILENAME)
    except TemplateError as error:
        raise TemplateFailure(f"the template does not compile: {error}") from None
    return ENVIRONMENT.template_class.from_code(ENVIRONMENT, code, ENVIRONMENT.make_globals(None))


def takes_parts(source):
    """Whether the template loops over a message's content (vLLM's "openai" content format)."""
    return bool(OPENAI_CONTENT_LOOP.search(source))


def render(template, variables, timeout_s, clock=time.perf_counter):
    """The template rendered with ``variables``; ``TemplateTimeout`` past ``timeout_s`` of ``clock``,
    ``TemplateFailure`` when it raises or its output passes ``MAX_OUTPUT_CHARS``."""
    deadline = clock() + timeout_s
    template_code = template.root_render_func.__code__.co_filename

    def on_line(frame, event, arg):
        if event == "line" and clock() > deadline:
            raise TemplateTimeout
        return on_line

    def on_call(frame, event, arg):
        # Only the template's own frames are traced line by line: Python's code it calls runs untraced.
        return on_line if frame.f_code.co_filename == template_code else None

    pieces, size = [], 0
    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        for piece in template.generate(**variables):
            size += len(piece)
            if size > MAX_OUTPUT_CHARS:
                raise TemplateFailure(f"the output passed {MAX_OUTPUT_CHARS} characters")
            pieces.append(piece)
            if clock() > deadline:
                raise TemplateTimeout
    except (TemplateTimeout, TemplateFailure):
        raise
    except RecursionError:
        raise TemplateFailure("the template recursed too deep") from None
    except Exception as error:  # noqa: BLE001 - a template may raise anything; it is the template's error
        raise TemplateFailure(f"{type(error).__name__}: {error}") from None
    finally:
        sys.settrace(previous)
    return "".join(pieces)


class NonText(Exception):
    """A message has a part that is not text (an image, audio): it cannot be keyed."""


def text_of(content, keep_parts):
    """A message's content as the template gets it: a string as it is, null as empty, a list of text parts joined
    by newlines (or kept as parts for a template that loops over them), empty ones left out as vLLM leaves them
    out; a part that is not text is ``NonText``."""
    if content is None or isinstance(content, str):
        return content if content is not None else ""
    texts = []
    for part in content:
        if part.get("type") != "text":
            raise NonText(part.get("type"))
        if part["text"]:
            texts.append(part["text"])
    return [{"type": "text", "text": text} for text in texts] if keep_parts else "\n".join(texts)


def conversation(messages, keep_parts):
    """The ``messages`` a template sees: role, content as ``text_of`` reads it, and the keys vLLM passes on."""
    out = []
    for message in messages:
        item = {"role": message["role"], "content": text_of(message.get("content"), keep_parts)}
        item.update((key, message[key]) for key in MESSAGE_KEYS if message.get(key) is not None)
        out.append(item)
    return out


def cut_after_final(rendered, messages):
    """``continue_final_message``: the render cut right after the final message's content, so the model goes on
    writing it (as Hugging Face cuts it: at its last occurrence, or of its stripped text)."""
    final = messages[-1]["content"] if messages else ""
    if isinstance(final, list):
        final = final[-1]["text"] if final else ""
    for text in (final, final.strip()):
        at = rendered.rfind(text)
        if text and at >= 0:
            return rendered[:at + len(text)]
    raise TemplateFailure("continue_final_message: the final message's content is not in the render")
