"""Routing policies of the benchmark: where the next request goes (pure, no network, no clock).

Three policies are a client's own, over the instance list it last read
(``GET /v1/instance/list``, refreshed every ``LIST_REFRESH_S``, as a
client-side balancer re-reads its upstreams): the instances whose status is
``alive``. What a client cannot see from the list (an engine that died
while its agent still reports, a slow or saturated one, a GPU in error) it
does not avoid, but it learns from its own failures as nginx does by
default: a refused connection is tried again on another instance
(``proxy_next_upstream error``), and an instance that failed a request is
left out for ``FAIL_TIMEOUT_S`` (``max_fails=1 fail_timeout=10s``).

- ``round-robin``: the next instance in turn.
- ``least-inflight``: the instance with the fewest of this client's own
  requests in flight (sent and not finished), ties in turn (nginx's
  ``least_conn``).
- ``random``: one at random (seeded).

The others ask the Proxy (``POST /v1/placement``, SPEC 14.1) and take the
first candidate of its answer (``placement_choice`` reads it); a refused
request is asked again with that instance in ``exclude``:

- ``placement``: cache-aware (SPEC 15.5): the body carries the prompt as
  ``prompt_block_keys`` (15.1 keys the router computes, ``placement_body``),
  or in the form ``--prompt-form`` names (``simulator.prompt_forms``: its
  token ids, its text, its chat), and the fleet's engines publish their
  caches' changes (15.3).
- ``placement-load``: issue 19's question, without the prompt (load alone).
- ``placement-learned``: the prompt sent, but no engine publishes events
  (their ``kv_events`` null): the Proxy learns from its own answers.
"""

from __future__ import annotations

from random import Random

from simulator.prompt_forms import KEYS, body_prompt

PLACEMENT = "placement"
PLACEMENT_LOAD = "placement-load"
PLACEMENT_LEARNED = "placement-learned"
ROUND_ROBIN = "round-robin"
LEAST_INFLIGHT = "least-inflight"
RANDOM = "random"
POLICIES = (PLACEMENT, PLACEMENT_LOAD, PLACEMENT_LEARNED, ROUND_ROBIN, LEAST_INFLIGHT, RANDOM)
MIXED_POLICIES = (PLACEMENT, ROUND_ROBIN, LEAST_INFLIGHT, RANDOM)  # issue 19's workload has no prompts
PLACEMENT_POLICIES = frozenset({PLACEMENT, PLACEMENT_LOAD, PLACEMENT_LEARNED})
MAX_PROMPT_KEYS = 8192  # of prompt_block_keys (SPEC 15.5)
LIST_REFRESH_S = 5.0
FAIL_TIMEOUT_S = 10.0  # nginx's default fail_timeout
MAX_ATTEMPTS = 3  # a refused request is tried on up to this many instances

# What the router does with a request, from the Proxy's verdict (SPEC 14.1). ROUTE_BUSY is no verdict: the web
# process's route lane was full (429 ``route_busy``), counted apart from a shed.
SEND, SHED, UNAVAILABLE, ROUTE_ERROR, ROUTE_BUSY = "send", "shed", "unavailable", "route_error", "route_busy"


def routable(rows, fleet_ids):
    """The instance ids of a list answer a client would route to: alive ones of the fleet, in list order."""
    if not isinstance(rows, list):
        return []
    return [row["instance_id"] for row in rows
            if isinstance(row, dict) and row.get("instance_id") in fleet_ids and row.get("status") == "alive"]


def policies_for(kind):
    """The policies a workload is routed by: issue 19's four for ``mixed`` (no prompts: the placement
    variants would ask the same question), all six for the prompt workloads."""
    return MIXED_POLICIES if kind == "mixed" else POLICIES


def publishes(policy):
    """Whether the engines of ``policy``'s fleet publish their prefix caches' changes (SPEC 15.2, 15.3)."""
    return policy != PLACEMENT_LEARNED


def placement_body(policy, model, prompt_tokens, output_tokens, count, keys=(), exclude=(), form=KEYS,
                   content=None):
    """The ``POST /v1/placement`` body of ``policy`` for one request.

    By default (``form`` ``keys``) the cache-aware policies send the prompt as
    its 15.1 keys rather than its token ids: 16 times fewer numbers on the
    wire (about 20 bytes a key against about 7 a token id, so a 7,000-token
    prompt is ~9 KB rather than ~50 KB), no hashing on the Proxy, and a
    session's keys are computed once, incrementally, by the client that holds
    the history. The other forms send ``content``, the prompt as a gateway
    holds it (``prompt_forms.body_prompt``), and the Proxy keys it.
    """
    body = {"model": model, "prompt_tokens": prompt_tokens, "max_tokens": output_tokens, "count": count}
    if policy != PLACEMENT_LOAD and form != KEYS and content is not None:
        body.update(body_prompt(form, content))
    elif policy != PLACEMENT_LOAD and keys:
        body["prompt_block_keys"] = list(keys[:MAX_PROMPT_KEYS])
    if exclude:
        body["exclude"] = list(exclude)
    return body


def placement_choice(status, data, fleet_ids):
    """``(action, instance_id|None)`` of a ``POST /v1/placement`` answer.

    200 with candidates: send to the first one of the fleet; 429: shed, or
    route busy when it is the route lane's ``route_busy`` and not a verdict;
    503, or 200 without a usable candidate: unavailable; anything else (a
    Proxy without the endpoint, a 400, a 5xx, not JSON): a route error.
    """
    if status == 429:
        busy = isinstance(data, dict) and data.get("error") == ROUTE_BUSY
        return (ROUTE_BUSY if busy else SHED), None
    if status == 503:
        return UNAVAILABLE, None
    if status != 200 or not isinstance(data, dict):
        return ROUTE_ERROR, None
    for candidate in data.get("candidates") or ():
        if isinstance(candidate, dict) and candidate.get("instance_id") in fleet_ids:
            return SEND, candidate["instance_id"]
    return UNAVAILABLE, None


class ClientPolicy:
    """A client-side policy over the instance list it last read; counts its own requests in flight."""

    name = None

    def __init__(self, seed=0):
        self.instances = []
        self.inflight = {}
        self.down_until = {}  # instance id -> until when (s) it is left out after a failure
        self.rng = Random(f"fleetwatch-routing-{self.name}:{seed}")
        self.turn = 0

    def update(self, instance_ids):
        """A fresh read of the list: route over these from now on."""
        self.instances = list(instance_ids)

    def started(self, instance_id):
        self.inflight[instance_id] = self.inflight.get(instance_id, 0) + 1

    def finished(self, instance_id):
        self.inflight[instance_id] -= 1

    def failed(self, instance_id, now_s):
        """A request to ``instance_id`` failed at ``now_s``: leave it out for ``FAIL_TIMEOUT_S``."""
        self.down_until[instance_id] = now_s + FAIL_TIMEOUT_S

    def candidates(self, now_s, exclude=()):
        """The instances to choose among: the listed ones not left out (all listed ones if every one is)."""
        up = [i for i in self.instances if i not in exclude and self.down_until.get(i, 0.0) <= now_s]
        return up or [i for i in self.instances if i not in exclude]

    def choose(self, now_s, exclude=()):
        """The instance id the next request goes to, or None when the list has none."""
        raise NotImplementedError


class RoundRobin(ClientPolicy):
    name = ROUND_ROBIN

    def choose(self, now_s, exclude=()):
        instances = self.candidates(now_s, exclude)
        if not instances:
            return None
        self.turn += 1
        return instances[(self.turn - 1) % len(instances)]


class LeastInflight(ClientPolicy):
    name = LEAST_INFLIGHT

    def choose(self, now_s, exclude=()):
        instances = self.candidates(now_s, exclude)
        if not instances:
            return None
        count = len(instances)
        start, self.turn = self.turn % count, self.turn + 1
        ordered = instances[start:] + instances[:start]  # ties in turn
        return min(ordered, key=lambda instance_id: self.inflight.get(instance_id, 0))


class RandomChoice(ClientPolicy):
    name = RANDOM

    def choose(self, now_s, exclude=()):
        instances = self.candidates(now_s, exclude)
        return self.rng.choice(instances) if instances else None


CLIENT_POLICIES = {policy.name: policy for policy in (RoundRobin, LeastInflight, RandomChoice)}
