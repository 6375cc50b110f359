"""How the routing benchmark's placement client sends a prompt (``--prompt-form``), and the text it sends.

- ``keys`` (the default): the SPEC 15.1 keys the client computes, ``prompt_block_keys``.
- ``ids``: the token ids, ``prompt_token_ids``; the Proxy keys them.
- ``text``: a completion's ``prompt``: the tenant's system prompt, the session's earlier turns as
  ``User:`` and ``Assistant:`` lines, the new question.
- ``chat``: a chat's ``messages``: the system prompt as the system message, the earlier questions and
  answers as user and assistant turns, the new question last.

With ``text`` and ``chat`` the Proxy tokenizes the prompt with the model's
tokenizer and chat template (SPEC 16.3, ``FLEETWATCH_TOKENIZERS``), so the
simulated engines must cache and hit the keys of exactly those ids:
``TextTurns`` tokenizes every prompt with the same tokenizer through the
Proxy's own code (``proxy_app.tokenizers.loaded``, pure, no Django) and keys
it over all its tokens but the last, as ``with_text_prompt`` does. Its words
come from the same draws as the token forms' ids (a draw picks a word of
``WORDS``), as many as make about the drawn count of tokens, so every form
has the same sessions, times and lengths.
"""

from __future__ import annotations

from dataclasses import dataclass
from random import Random

from agent.prefix_keys import DEFAULT_BLOCK_TOKENS, prompt_keys
from simulator.prompts import Prompt, TokenTurns, draw_tokens

KEYS, IDS, TEXT, CHAT = "keys", "ids", "text", "chat"
PROMPT_FORMS = (KEYS, IDS, TEXT, CHAT)
TEXT_FORMS = frozenset({TEXT, CHAT})
# The body's field of each form (``keys``: ``routing.placement_body``'s own).
FIELDS = {IDS: "prompt_token_ids", TEXT: "prompt", CHAT: "messages"}
# English words a small tokenizer knows whole or in two pieces: the tests' tiny one makes ~3 characters a token
# of them, a real one (Llama 3's) ~5.
WORDS = tuple(
    "the cache serves each request from its prefix so that all instances return short answers which function "
    "has the parameters of the world who describes the system for five minutes and the assistant places every "
    "question on one instance then prints a paragraph that follows hello weather sun cat sleep jumps course tool "
    "name type number summary".split())
SEGMENT_CACHE_BYTES = 64 * 1024 * 1024  # the Proxy's default FLEETWATCH_TOKENIZER_CACHE_MB
TEMPLATE_TIMEOUT_S = 10.0  # the render is the same whatever the limit; this one only stops a runaway template
CALIBRATION_WORDS = 4000


class TokenizerError(ValueError):
    """The tokenizer directory cannot make the text forms' prompts; the text says why."""


def load_tokenizer(path):
    """The model tokenizer of directory ``path`` as the Proxy loads an operator's (``FLEETWATCH_TOKENIZERS``)."""
    # Imported here: only the text forms need the server extra's tokenizers and Jinja2.
    from proxy_app.tokenizers.loaded import LoadError, ModelTokenizer, directory_files
    from proxy_app.tokenizers.segments import SegmentCache

    try:
        return ModelTokenizer(directory_files(path), "operator", SegmentCache(SEGMENT_CACHE_BYTES))
    except LoadError as error:
        raise TokenizerError(f"--tokenizer {path}: {error}") from None


def turns_of(form, model, block_tokens=DEFAULT_BLOCK_TOKENS, tokenizer=None):
    """The writer of a workload's turns in ``form`` (``tokenizer``: a loaded one, for the text forms)."""
    if form in TEXT_FORMS:
        return TextTurns(form, model, tokenizer, block_tokens)
    return TokenTurns(model, block_tokens, keep_ids=form == IDS)


def body_prompt(form, content):
    """``{field: value}`` of a prompt's ``content`` in the placement body of ``form`` (not ``keys``)."""
    if form == IDS:
        return {FIELDS[IDS]: memoryview(content).cast("I").tolist()}  # packed as SPEC 15.1 packs (little-endian)
    return {FIELDS[form]: content}


@dataclass(frozen=True)
class Conversation:
    """A session so far, as text: the tenant's system prompt and the (question, answer) turns; the draws each
    came from (``sizes``) make a ``no-prefix`` turn its own words of the same lengths."""

    system: str
    turns: tuple = ()
    sizes: tuple = ()  # the draws' counts: the system prompt's, then a question's and an answer's per turn

    def then(self, question, answer, sizes):
        return Conversation(self.system, self.turns + ((question, answer),), self.sizes + sizes)


class TextTurns:
    """A session's turns as text (``text``) or a chat (``chat``), keyed over the ids the Proxy computes of them."""

    def __init__(self, form, model, tokenizer, block_tokens=DEFAULT_BLOCK_TOKENS):
        if form == CHAT and tokenizer.template is None:
            raise TokenizerError("--prompt-form chat: the tokenizer has no chat template "
                                 f"({tokenizer.template_error or 'none in its files'})")
        self.form, self.model, self.tokenizer, self.block_tokens = form, model, tokenizer, block_tokens
        sample = " ".join(Random("fleetwatch-routing-words").choices(WORDS, k=CALIBRATION_WORDS))
        self.chars_per_token = len(sample) / (len(tokenizer.prompt_ids(sample, special=False)) // 4)

    def words(self, draws):
        """Text of about ``len(draws)`` tokens, a word of ``WORDS`` a draw."""
        target, size, out = len(draws) * self.chars_per_token, -1, []
        for draw in draws:
            if size >= target:
                break
            word = WORDS[draw % len(WORDS)]
            out.append(word)
            size += len(word) + 1
        return " ".join(out)

    def start(self, system):
        return Conversation(self.words(system), sizes=(len(system),))

    def grown(self, history, question, answer):
        return history.then(self.words(question), self.words(answer), (len(question), len(answer)))

    def turn(self, history, question, answer):
        question_text, answer_text = self.words(question), self.words(answer)
        return self._prompt(history, question_text, answer_text), history.then(
            question_text, answer_text, (len(question), len(answer)))

    def own_turn(self, unique, history, question, answer):
        sizes = history.sizes + (len(question),)
        texts = [self.words(draw_tokens(unique, size)) for size in sizes]
        own = Conversation(texts[0], tuple(zip(texts[1:-1:2], texts[2:-1:2])))
        return self._prompt(own, texts[-1], self.words(answer)), history.then(
            texts[-1], self.words(answer), (len(question), len(answer)))

    def _prompt(self, history, question, answer):
        """The turn's ``Prompt``: its content, its ids' count and keys (all but the last token), and the keys
        the answer completes (those of the next turn's prefix past the prompt's)."""
        content, ids = self.content(history, question)
        _, done = self.content(history, question, answer)
        keys = prompt_keys(self.model, ids[:-4], self.block_tokens)
        done_keys = prompt_keys(self.model, done, self.block_tokens)
        shared = next((i for i, (a, b) in enumerate(zip(keys, done_keys)) if a != b), min(len(keys), len(done_keys)))
        return Prompt(len(ids) // 4, tuple(keys), tuple(done_keys[shared:]), content)

    def content(self, history, question, answer=None):
        """``(content, ids)``: the turn's body content and its packed ids as the Proxy computes them; with
        ``answer``, the conversation through it (what the session's next turn starts with)."""
        if self.form == TEXT:
            text = history.system + "\n\n" + "".join(f"User: {q}\nAssistant: {a}\n\n" for q, a in history.turns)
            text += f"User: {question}\nAssistant:"
            if answer is not None:
                text += f" {answer}\n\n"
            return text, self.tokenizer.prompt_ids(text)  # a prompt gets the special tokens the tokenizer adds
        messages = [{"role": "system", "content": history.system}]
        for q, a in history.turns:
            messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        messages.append({"role": "user", "content": question})
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
        chat = {"messages": messages, "add_generation_prompt": answer is None, "continue_final_message": False}
        return messages, self.tokenizer.chat_ids(chat, TEMPLATE_TIMEOUT_S)
