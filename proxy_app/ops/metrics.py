"""The Proxy's figures for ``/metrics`` (SPEC 11), read from the database at scrape time.

Every family carries this Proxy's ``proxy_id`` as its first label
(``ProxyGauge``), so the pools of one Prometheus stay apart. Per-instance
and per-GPU samples (``proxy_app.ops.host_metrics``, the engines' below) exist
for instances within their TTL only, so the label sets stay as large as the
live pool; ``fleetwatch_instance_up`` covers every registered instance (1
within the TTL, alive or suspect; 0 once stale, until it expires) and
``fleetwatch_instance_alive`` is 1 for alive ones only. A value the instance
did not report is no sample at all, never 0. Nothing here runs on the
ingest path.
"""

import orjson
from django.conf import settings
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from controlplane import clock
from controlplane.endpoints import liveness
from controlplane.endpoints.liveness import Status
from controlplane.figures import finite
from controlplane.ops.gauges import put
from controlplane.ops.pool_metrics import PoolFamilies
from proxy_app.ingest.engines import figures_by_model
from proxy_app.models import Instance, InstanceResource, PoolResource, SchedulerLinkState
from proxy_app.ops.history import latest_pool_resource
from proxy_app.ops.host_metrics import HostFamilies
from proxy_app.placement.fence_store import effective_fence
from proxy_app.pool.summary import pool_resource, proxy_id
from proxy_app.prefix.store import blocks_by_instance

POOL_STATES = ("alive", "with_resource", "accepting", "degraded", "rejecting")
RESOURCE_COLUMNS = ("cpu_util", "memory_used_mb", "memory_total_mb", "network_rx_mbps", "network_tx_mbps",
                    "admission_state", "resource_reported_at")


class ProxyGauge(GaugeMetricFamily):
    """A gauge of this Proxy: ``proxy_id`` is its first label, filled in by ``add_metric``."""

    def __init__(self, name, documentation, labels=()):
        super().__init__(name, documentation, labels=["proxy_id", *labels])
        self.proxy_id = proxy_id()

    def add_metric(self, labels, value, timestamp=None):
        super().add_metric([self.proxy_id, *labels], value, timestamp)


_gauge = ProxyGauge


class ProxyCounter(CounterMetricFamily):
    """A counter of this Proxy, ``proxy_id`` first as on its gauges."""

    def __init__(self, name, documentation, labels=()):
        super().__init__(name, documentation, labels=["proxy_id", *labels])
        self.proxy_id = proxy_id()

    def add_metric(self, labels, value, created=None, timestamp=None):
        super().add_metric([self.proxy_id, *labels], value, created, timestamp)
# What ``effective_fence`` reads, in its order.
FENCE_COLUMNS = ("fenced", "fence_reason", "had_ok_engine", "resource__engine_count", "resource__engine_ok_count",
                 "resource__engine_status", "resource__gpu_error_count")


class ProxyCollector:
    def collect(self):
        now = clock.now()
        states = dict.fromkeys(Status.values, 0)
        up = _gauge("fleetwatch_instance_up", "1 while the instance is within its TTL (alive or suspect), "
                    "0 once stale (until it expires).", ["instance_id"])
        alive = _gauge("fleetwatch_instance_alive", "1 while the instance is alive (seen within its alive "
                       "window), else 0.", ["instance_id"])
        fenced = _gauge("fleetwatch_instance_fenced", "1 while the instance is fenced: kept out of placement after "
                        "router errors, an engine that went down or a GPU in error (SPEC 14.2), else 0.",
                        ["instance_id"])
        live_ids = set()
        ttl_s, interval_s = Instance.ttl_s(), Instance.heartbeat_interval_s()
        for instance_id, seen, *fence in Instance.objects.values_list("instance_id", "last_seen_at", *FENCE_COLUMNS):
            status = liveness.status_at(seen, now, ttl_s, interval_s)
            states[status] += 1
            up.add_metric([instance_id], 1.0 if status != Status.STALE else 0.0)
            alive.add_metric([instance_id], 1.0 if status == Status.ALIVE else 0.0)
            fenced.add_metric([instance_id], 1.0 if effective_fence(*fence)[0] else 0.0)
            if status != Status.STALE:
                live_ids.add(instance_id)
        counts = _gauge("fleetwatch_instances", "Registered instances by liveness state (they add up to all).",
                        ["state"])
        for state, count in states.items():
            counts.add_metric([state], count)
        yield counts
        yield up
        yield alive
        yield fenced
        yield from self._resources(live_ids, now)
        yield self._prefix(live_ids)
        yield from self._cached_tokens()
        yield from self._pool(now)
        yield from self._processes(now)

    def _prefix(self, live_ids):
        """Keys the pool prefix index holds per live instance (SPEC 15.4); its counters are the process's
        (``proxy_app.prefix.store``: ``fleetwatch_prefix_updates_total``, ``fleetwatch_prefix_resyncs_total``)."""
        blocks = _gauge("fleetwatch_prefix_blocks", "Prompt blocks (SPEC 15.1 keys) the pool prefix index holds for "
                        "the instance's engines, from their KV-cache events.", ["instance_id"])
        for instance_id, count in sorted(blocks_by_instance(live_ids).items()):
            blocks.add_metric([instance_id], count)
        return blocks

    def _cached_tokens(self):
        """The routers' audit of cache-aware placement (SPEC 16.4), per instance that has any."""
        cached = ProxyCounter("fleetwatch_placement_cached_tokens", "Prompt tokens the engine said it served from its "
                              "cache (usage.prompt_tokens_details.cached_tokens), as routers reported them.",
                              ["instance_id"])
        predicted = ProxyCounter("fleetwatch_placement_predicted_cached_tokens", "Prompt tokens placement predicted "
                                 "the instance held cached (prefix_hit_tokens) for the requests routers reported.",
                                 ["instance_id"])
        rows = Instance.objects.filter(Q(cached_tokens_total__gt=0) | Q(predicted_cached_tokens_total__gt=0))
        for instance_id, cached_total, predicted_total in rows.values_list(
                "instance_id", "cached_tokens_total", "predicted_cached_tokens_total"):
            cached.add_metric([instance_id], cached_total)
            predicted.add_metric([instance_id], predicted_total)
        yield from (cached, predicted)

    def _processes(self, now):
        """The recorder's and the link's traces in the database (what /readyz judges, as figures)."""
        recorded = _gauge("fleetwatch_recorder_last_record_age_seconds", "Seconds since the recorder's newest pool row.")
        newest = PoolResource.objects.order_by("-t").values_list("t", flat=True).first()
        _add([], (recorded, None if newest is None else max(0.0, now - newest)))
        attempt = _gauge("fleetwatch_link_last_attempt_age_seconds", "Seconds since the link last tried the Scheduler.")
        success = _gauge("fleetwatch_link_last_success_age_seconds",
                         "Seconds since the Scheduler last accepted the link's register or heartbeat.")
        failures = _gauge("fleetwatch_link_consecutive_failures", "The link's failed attempts since its last success.")
        state = SchedulerLinkState.objects.filter(proxy_id=proxy_id()).first()
        if state is not None:
            _add([], (attempt, clock.age_s(now, state.last_attempt_at)), (success, clock.age_s(now, state.last_ok_at)),
                 (failures, state.consecutive_failures))
        yield from (recorded, attempt, success, failures)

    def _resources(self, live_ids, now):
        hosts = HostFamilies(_gauge)
        engine = EngineFamilies()
        rows = (InstanceResource.objects.filter(instance_id__in=live_ids)
                .annotate(raw=Cast("instance__snapshot__raw_resource", TextField()))
                .values_list("instance_id", *RESOURCE_COLUMNS, "raw"))
        for instance_id, *columns, raw in rows.iterator(chunk_size=500):
            hosts.add_instance(instance_id, dict(zip(RESOURCE_COLUMNS, columns)), now)
            snapshot = _snapshot(raw)
            for index, gpu in _gpus(snapshot):
                hosts.add_gpu(instance_id, index, gpu)
            engine.add(instance_id, snapshot.get("engines"))
        yield from (*hosts.families(), *engine.families())

    def _pool(self, now):
        row = latest_pool_resource(max_age_s=2 * settings.FLEETWATCH_SERIES_INTERVAL_S + 1)
        summary = row.summary if row is not None else pool_resource(now)
        instances = summary.get("instances", {})
        family = _gauge("fleetwatch_pool_instances", "This pool's instances by state (SPEC 5). Compat: the states "
                        "overlap (alive holds with_resource, which holds accepting...): never sum them; the "
                        "fleetwatch_pool_instances_* families do not overlap.", ["state"])
        for state in POOL_STATES:
            if instances.get(state) is not None:
                family.add_metric([state], instances[state])
        yield family
        figures = PoolFamilies("fleetwatch_pool_", _gauge)
        figures.add([], summary)
        yield from figures.families()
        engine = summary.get("engine") if isinstance(summary.get("engine"), dict) else {}
        saturation = _gauge("fleetwatch_pool_engine_saturation",
                            "Mean engine saturation of the pool, min(1, max(waiting / W, kv usage / K)), 0-1.")
        waiting = _gauge("fleetwatch_pool_engine_requests_waiting", "Requests waiting in the pool's engines.")
        _add([], (saturation, finite(engine.get("saturation"))), (waiting, finite(engine.get("requests_waiting_total"))))
        yield saturation
        yield waiting


class EngineFamilies:
    """The per-instance engine gauges (SPEC 13) from stored snapshots: ``ok`` engines only, one sample per
    (instance, model), queues summed and KV usage and TTFT the worst over the model's engines."""

    def __init__(self):
        labels = ["instance_id", "model"]
        self.waiting = _gauge("fleetwatch_engine_requests_waiting", "Requests waiting in the engine's queue.", labels)
        self.running = _gauge("fleetwatch_engine_requests_running", "Requests the engine is running.", labels)
        self.kv = _gauge("fleetwatch_engine_kv_cache_usage_ratio", "Share of the engine's KV cache in use, 0-1.",
                         labels)
        self.ttft = _gauge("fleetwatch_engine_ttft_p95_seconds",
                           "95th percentile time to first token over the agent's window.", labels)

    def add(self, instance_id, engines):
        for model, figures in figures_by_model(engines).items():
            _add([instance_id, model], (self.waiting, figures["requests_waiting"]),
                 (self.running, figures["requests_running"]), (self.kv, figures["kv_cache_usage_ratio"]),
                 (self.ttft, figures["ttft_p95_s"]))

    def families(self):
        return self.waiting, self.running, self.kv, self.ttft


def _snapshot(raw):
    """A stored snapshot as a dict; {} for none or one that does not parse."""
    try:
        snapshot = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        return {}
    return snapshot if isinstance(snapshot, dict) else {}


def _gpus(snapshot):
    """(index as text, row) of each GPU row of a stored snapshot that has an index."""
    devices = snapshot.get("devices")
    gpus = devices.get("gpu") if isinstance(devices, dict) else None
    for gpu in gpus if isinstance(gpus, list) else ():
        if isinstance(gpu, dict) and isinstance(gpu.get("index"), int) and not isinstance(gpu.get("index"), bool):
            yield str(gpu["index"]), gpu


def _add(labels, *samples):
    """Add each ``(family, value)`` sample under ``labels``; an unknown value is no sample, never 0."""
    for family, value in samples:
        put(family, labels, value)

