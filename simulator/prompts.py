"""The routing benchmark's prompts: token ids from the seed, their SPEC 15.1 keys, two workloads (pure).

- ``shared-prefix`` (modelled on llm-d's precise-prefix-cache benchmark,
  scaled to what two cores drive): ``tenants`` tenants, each with its own
  system prompt of several thousand tokens; conversations (sessions) start
  as a Poisson stream, each of one tenant (picked uniformly), and run
  ``turns`` turns ``turn_gap_s`` apart; a turn's prompt is the tenant's
  system prompt, the session's history (every earlier question and answer)
  and the new question, so it shares the system prompt with every session
  of its tenant and its whole history with the session's next turn.
- ``no-prefix``: the same arrival times and lengths, every prompt's tokens
  its own (nothing to share, nothing to hit).

Token ids are ints below ``VOCABULARY`` (Llama 3's), drawn from the seed;
only their keys (and their count) are kept per request: a prompt's keys
are computed once, incrementally along a session (``Chain``), so a turn's
cost is its new tokens' blocks. ``TokenTurns`` writes the turns so
(``--prompt-form keys``, and ``ids`` with the ids kept to send);
``simulator.prompt_forms`` writes them as text or chats from the same
draws.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from random import Random

from agent.prefix_keys import DEFAULT_BLOCK_TOKENS, chain_keys, prompt_keys, seed_of, token_bytes

VOCABULARY = 128_256
SHARED_PREFIX, NO_PREFIX = "shared-prefix", "no-prefix"


@dataclass(frozen=True)
class Prompt:
    """One request's prompt as the router and the engine need it: its length and its block keys.

    ``answer_keys`` are the blocks the answer completes after the prompt's
    (the engine keeps them when it finishes, as vLLM caches generated blocks).
    """

    tokens: int
    keys: tuple
    answer_keys: tuple = ()
    content: object = None  # what the body sends in place of the keys (``prompt_forms``): ids, text or messages


class Chain:
    """A token sequence's keys, grown a segment at a time (the trailing partial block kept aside); with
    ``keep_ids`` its ids too, packed (``ids``, else None)."""

    __slots__ = ("keys", "tail", "last", "tokens", "block_tokens", "ids")

    def __init__(self, model, block_tokens=DEFAULT_BLOCK_TOKENS, keep_ids=False):
        self.keys, self.tail, self.last, self.tokens = (), [], seed_of(model), 0
        self.block_tokens = block_tokens
        self.ids = b"" if keep_ids else None

    def extended(self, tokens):
        """A new chain: this one followed by ``tokens``."""
        grown = Chain.__new__(Chain)
        grown.block_tokens = self.block_tokens
        grown.ids = None if self.ids is None else self.ids + token_bytes(tokens)
        data = self.tail + list(tokens)
        new = chain_keys(self.last, data, self.block_tokens)
        cut = len(new) * self.block_tokens
        grown.keys = self.keys + tuple(new)
        grown.tail = data[cut:]
        grown.last = new[-1] if new else self.last
        grown.tokens = self.tokens + len(tokens)
        return grown


def draw_tokens(rng: Random, count):
    """``count`` token ids below ``VOCABULARY`` from ``rng``."""
    return [token % VOCABULARY for token in array("I", rng.randbytes(4 * count))]


def lognormal(rng: Random, mean, sigma):
    return max(1, round(rng.lognormvariate(math.log(mean) - sigma ** 2 / 2, sigma)))


class TokenTurns:
    """A session's turns as token ids (``--prompt-form keys``, and ``ids`` with ``keep_ids``): a history is a
    ``Chain`` of the system prompt and the turns so far; a prompt is keyed over all its tokens, as the Proxy keys
    ``prompt_token_ids``.

    Every writer of turns (``prompt_forms.TextTurns`` too) answers ``start``, ``grown``, ``turn`` and ``own_turn``
    from the workload's draws, so the same seed gives the same sessions whatever the form.
    """

    def __init__(self, model, block_tokens=DEFAULT_BLOCK_TOKENS, keep_ids=False):
        self.model, self.block_tokens, self.keep_ids = model, block_tokens, keep_ids

    def start(self, system):
        """A tenant's history: its system prompt of the drawn ids ``system``."""
        return Chain(self.model, self.block_tokens, self.keep_ids).extended(system)

    def grown(self, history, question, answer):
        """``history`` with a turn that was not sent (before the traffic)."""
        return history.extended(question + answer)

    def turn(self, history, question, answer):
        """``(Prompt, history after it)`` of the next turn of a session."""
        return self._prompt(history.extended(question), answer)

    def own_turn(self, unique, history, question, answer):
        """The same as ``turn``'s length, every token its own (``no-prefix``), drawn from ``unique``."""
        own = draw_tokens(unique, history.tokens + len(question))
        return self._prompt(Chain(self.model, self.block_tokens, self.keep_ids).extended(own), answer)

    @staticmethod
    def _prompt(prompt, answer):
        done = prompt.extended(answer)
        return Prompt(prompt.tokens, prompt.keys, done.keys[len(prompt.keys):], prompt.ids), done


@dataclass(frozen=True)
class PromptWorkload:
    """The prompts of ``shared-prefix`` and ``no-prefix`` (docs/simulator.md)."""

    kind: str = SHARED_PREFIX
    tenants: int = 24
    system_min: int = 4000  # tokens of a tenant's system prompt, uniform between these
    system_max: int = 8000
    turns: tuple = (2, 5)  # turns of a session, uniform between these
    turn_gap_s: tuple = (4.0, 12.0)  # between a session's turns, uniform (the user reading and typing)
    question_mean: int = 250  # tokens of a question (log-normal)
    answer_mean: int = 120  # tokens of an answer (log-normal): the request's max_tokens
    sigma: float = 0.5
    block_tokens: int = DEFAULT_BLOCK_TOKENS

    @property
    def prompt_mean(self):
        """The mean prompt length, for the offered load: a system prompt and half a session's history."""
        mean_turns = sum(self.turns) / 2
        history = (mean_turns - 1) / 2 * (self.question_mean + self.answer_mean)
        return (self.system_min + self.system_max) / 2 + history + self.question_mean

    def arrivals(self, model, seed, rate_per_s, duration_s, turns=None):
        """``[(at_s, Prompt, output_tokens)]`` in arrival order: sessions start so that requests come at
        ``rate_per_s`` on average over ``duration_s``; turns past the end are not sent. ``turns`` writes the
        prompts (``TokenTurns`` by default: keys of token ids)."""
        turns = turns or TokenTurns(model, self.block_tokens)
        rng = Random(f"fleetwatch-routing-prompts:{seed}")  # the same sessions for both kinds
        systems = [turns.start(draw_tokens(rng, rng.randint(self.system_min, self.system_max)))
                   for _ in range(self.tenants)]
        unique = Random(f"fleetwatch-routing-unique:{seed}")
        mean_turns = sum(self.turns) / 2
        session_rate = rate_per_s / mean_turns
        # Steady from the first second: sessions start from a whole session's span before the traffic, and
        # only their turns within it are sent (a session joined midway starts with a turn of its history).
        stream, start = [], -(self.turns[1] - 1) * self.turn_gap_s[1]
        if session_rate <= 0.0:
            return stream
        while True:
            start += rng.expovariate(session_rate)
            if start >= duration_s:
                break
            tenant = rng.randrange(self.tenants)
            at, history = start, systems[tenant]
            for turn in range(rng.randint(*self.turns)):
                if turn:
                    at += rng.uniform(*self.turn_gap_s)
                question = draw_tokens(rng, lognormal(rng, self.question_mean, self.sigma))
                answer = draw_tokens(rng, lognormal(rng, self.answer_mean, self.sigma))
                if not 0.0 <= at < duration_s:
                    history = turns.grown(history, question, answer) if at < 0.0 else history
                    continue  # draw on regardless: the same seed gives the same sessions at any duration
                if self.kind == NO_PREFIX:
                    # The same length, tokens its own: nothing of it is anyone else's.
                    prompt, history = turns.own_turn(unique, history, question, answer)
                else:
                    prompt, history = turns.turn(history, question, answer)
                stream.append((at, prompt, len(answer)))
        stream.sort(key=lambda item: item[0])
        return stream


def keys_of(model, tokens, block_tokens=DEFAULT_BLOCK_TOKENS):
    """A prompt's keys from its token ids (what ``Chain`` computes incrementally)."""
    return tuple(prompt_keys(model, tokens, block_tokens))
