"""What a placement decision (``proxy_app.placement.decision``) is asked with, and what it answers per instance:
plain frozen values, no numpy, no database."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Candidate:
    """What placement knows of one instance."""

    instance_id: str
    host: str
    port: int
    last_seen_at: float
    reported_at: float | None = None  # the latest snapshot's receive time
    endpoints: tuple = ()
    admission_state: str | None = None
    gpu_error: bool = False
    fenced: bool = False
    models: frozenset = frozenset()
    adapters: frozenset = frozenset()
    engine_ok: bool = False
    requests_waiting: int | None = None
    requests_running: int | None = None
    kv_cache_usage_ratio: float | None = None
    gpu_util: float | None = None  # 0-100
    pending: int = 0  # placed here since its latest report
    kv_events: bool = False  # some engine's KV-cache events are read with status ok (SPEC 15.2)

    @property
    def key(self):
        return self.instance_id


@dataclasses.dataclass(frozen=True)
class Request:
    model: str | None = None
    adapter: str | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    session_key: str | None = None
    count: int = 3
    exclude: frozenset = frozenset()
    prompt_keys: tuple | None = None  # SPEC 15.1 keys of the prompt's full blocks; None: no prompt


@dataclasses.dataclass(frozen=True)
class Policy:
    ttl_s: float
    heartbeat_interval_s: float
    max_age_s: float = 2.0
    waiting_scale: float = 5.0  # W
    kv_scale: float = 0.8  # K
    shed_pressure: float = 2.0


@dataclasses.dataclass(frozen=True)
class Ranked:
    candidate: Candidate
    tier: int
    pressure: float | None
    signal_age_s: float | None
    reasons: tuple
    prefix_hit_blocks: int = 0
