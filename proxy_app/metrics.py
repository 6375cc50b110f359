"""The Proxy's figures for ``/metrics`` (SPEC 11), read from the database at scrape time.

Per-instance and per-GPU samples exist for alive instances only, so the
label sets stay as large as the live pool; ``fleetwatch_instance_up`` covers
every registered instance (0 once stale, until it expires). A value the
instance did not report is no sample at all, never 0.
"""

import orjson
from django.conf import settings
from django.db.models import TextField
from django.db.models.functions import Cast
from prometheus_client.core import GaugeMetricFamily

from controlplane import clock
from controlplane.endpoints.liveness import Status
from controlplane.figures import finite, ratio
from proxy_app.history import latest_pool_resource
from proxy_app.models import Instance, InstanceResource
from proxy_app.pool import pool_resource

MIB = 2**20
POOL_STATES = ("alive", "with_resource", "accepting", "degraded", "rejecting")


def _gauge(name, documentation, labels=()):
    return GaugeMetricFamily(name, documentation, labels=list(labels))


class ProxyCollector:
    def collect(self):
        now = clock.now()
        states = dict.fromkeys(Status.values, 0)
        up = _gauge("fleetwatch_instance_up", "1 while the instance is alive (seen within its TTL), else 0.",
                    ["instance_id"])
        alive_ids = set()
        for instance in Instance.objects.only("instance_id", "last_seen_at"):
            status = instance.status_now(now)
            states[status] += 1
            up.add_metric([instance.instance_id], 1.0 if status != Status.STALE else 0.0)
            if status != Status.STALE:
                alive_ids.add(instance.instance_id)
        counts = _gauge("fleetwatch_instances", "Registered instances by liveness state.", ["state"])
        for state, count in states.items():
            counts.add_metric([state], count)
        yield counts
        yield up
        yield from self._resources(alive_ids)
        yield from self._pool(now)

    def _resources(self, alive_ids):
        cpu = _gauge("fleetwatch_instance_cpu_utilization_ratio", "Host CPU busy share, 0-1.", ["instance_id"])
        used = _gauge("fleetwatch_instance_memory_used_bytes", "Host memory in use (total - available).",
                      ["instance_id"])
        total = _gauge("fleetwatch_instance_memory_total_bytes", "Host memory.", ["instance_id"])
        gpu_util = _gauge("fleetwatch_gpu_utilization_ratio", "GPU utilisation over the agent's window, 0-1.",
                          ["instance_id", "gpu"])
        gpu_used = _gauge("fleetwatch_gpu_memory_used_bytes", "GPU memory in use.", ["instance_id", "gpu"])
        gpu_temp = _gauge("fleetwatch_gpu_temperature_celsius", "GPU temperature.", ["instance_id", "gpu"])
        engine = EngineFamilies()
        rows = (InstanceResource.objects.filter(instance_id__in=alive_ids)
                .annotate(raw=Cast("instance__snapshot__raw_resource", TextField()))
                .values_list("instance_id", "cpu_util", "memory_used_mb", "memory_total_mb", "raw"))
        for instance_id, cpu_util, used_mb, total_mb, raw in rows.iterator(chunk_size=500):
            labels = [instance_id]
            _add(labels, (cpu, ratio(cpu_util, 100)), (used, _bytes(used_mb)), (total, _bytes(total_mb)))
            snapshot = _snapshot(raw)
            for index, gpu in _gpus(snapshot):
                _add([instance_id, index], (gpu_util, ratio(finite(gpu.get("utilization_pct")), 100)),
                     (gpu_used, _bytes(finite(gpu.get("memory_used_mb")))),
                     (gpu_temp, finite(gpu.get("temperature_c"))))
            engine.add(instance_id, snapshot.get("engines"))
        yield from (cpu, used, total, gpu_util, gpu_used, gpu_temp, *engine.families())

    def _pool(self, now):
        row = latest_pool_resource(max_age_s=2 * settings.FLEETWATCH_SERIES_INTERVAL_S + 1)
        summary = row.summary if row is not None else pool_resource(now)
        instances = summary.get("instances", {})
        family = _gauge("fleetwatch_pool_instances", "This pool's instances by state (SPEC 5).", ["state"])
        for state in POOL_STATES:
            if instances.get(state) is not None:
                family.add_metric([state], instances[state])
        yield family
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
        models = {}
        for engine in engines if isinstance(engines, list) else ():
            if not isinstance(engine, dict) or engine.get("status") != "ok":
                continue
            model = engine.get("model") if isinstance(engine.get("model"), str) else ""
            models.setdefault(model, []).append(engine)
        for model, listed in models.items():
            _add([instance_id, model], (self.waiting, _total(listed, "requests_waiting")),
                 (self.running, _total(listed, "requests_running")),
                 (self.kv, _worst(listed, "kv_cache_usage_ratio")), (self.ttft, _worst(listed, "ttft_p95_s")))

    def families(self):
        return self.waiting, self.running, self.kv, self.ttft


def _figures(engines, name):
    return [value for value in (finite(engine.get(name)) for engine in engines) if value is not None]


def _total(engines, name):
    values = _figures(engines, name)
    return sum(values) if values else None


def _worst(engines, name):
    values = _figures(engines, name)
    return max(values) if values else None


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
        if value is not None:
            family.add_metric(labels, value)


def _bytes(mib):
    return None if mib is None else mib * MIB
