"""The serving engines of a host (SPEC 13): a snapshot's ``engines`` list as columns, and the pool's view.

Pure functions, no database, no clock. ``engine_columns`` reads one
snapshot's list defensively (any agent version, any garbage: a value that is
not a finite number is null, never 0); ``model_counts`` ranks the models of
the pool summary's ``engine`` section (``proxy_app.pool.answers``);
``engine_pressure`` and ``saturation`` are the one formula of an engine's load.
"""

import numpy as np

from proxy_app.ingest.lenient import integer, number, text

OK = "ok"
# Worst first: what an instance's ``engine_status`` says when its engines disagree.
STATUS_SEVERITY = ("unreachable", "timeout", "http_error", "bad_format", OK)
MAX_MODELS = 32
MODEL_LENGTH = 255
ENGINE_SOURCE = "agent_engine_scrape"

ENGINE_FIELDS = (
    "engine_count", "engine_ok_count", "engine_status", "engine_models", "requests_running", "requests_waiting",
    "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s", "engine_sample_age_ms", "engine_loras",
    "kv_events_ok_count", "adapter_parents",
)
MAX_LORAS = 64
NO_ENGINES = dict.fromkeys(ENGINE_FIELDS)


def _status(engine):
    """An engine's status word; one this Proxy does not know counts as ``bad_format``."""
    status = text(engine.get("status"), 32)
    status = status.lower() if status else None
    return status if status in STATUS_SEVERITY else "bad_format"


def worst_status(statuses):
    return min(statuses, key=STATUS_SEVERITY.index) if statuses else None


def _ratio(value):
    value = number(value)
    return value if value is not None and 0.0 <= value <= 1.0 else None


def _count(value):
    value = integer(value)
    return value if value is not None and value >= 0 else None


def _sum(values):
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _max(values):
    present = [value for value in values if value is not None]
    return max(present) if present else None


def engine_columns(snapshot, snapshot_ts_ms):
    """The SPEC 13 columns of one snapshot; all null when it lists no engines (``engines`` absent).

    Queue and KV figures come from the ``ok`` engines only: a failed scrape
    reports nulls, and an engine that is down is not an empty one.
    ``engine_models`` is sorted and distinct, so equal model sets group together.
    """
    listed = snapshot.get("engines")
    if not isinstance(listed, list):
        return dict(NO_ENGINES)
    engines = [engine for engine in listed if isinstance(engine, dict)]
    statuses = [_status(engine) for engine in engines]
    ok = [engine for engine, status in zip(engines, statuses) if status == OK]
    bases, parents = served_ids(engines)
    models = sorted({model for model in (text(engine.get("model"), MODEL_LENGTH) for engine in engines) if model}
                    | bases)
    stamps = [stamp for stamp in (integer(engine.get("scraped_at_ms")) for engine in engines) if stamp is not None]
    age = max(0, snapshot_ts_ms - max(stamps)) if stamps and snapshot_ts_ms is not None else None
    return {
        "engine_count": len(engines),
        "engine_ok_count": len(ok),
        "engine_status": worst_status(statuses),
        "engine_models": models,
        "requests_running": _sum(_count(engine.get("requests_running")) for engine in ok),
        "requests_waiting": _sum(_count(engine.get("requests_waiting")) for engine in ok),
        "kv_cache_usage_ratio": _max(_ratio(engine.get("kv_cache_usage_ratio")) for engine in ok),
        "kv_cache_capacity_tokens": _sum(_count(engine.get("kv_cache_capacity_tokens")) for engine in ok),
        "ttft_p95_s": _max(_nonnegative(engine.get("ttft_p95_s")) for engine in ok),
        "engine_sample_age_ms": age,
        "engine_loras": sorted(set(_running_loras(ok)) | parents.keys())[:MAX_LORAS],
        "kv_events_ok_count": sum(_kv_events_ok(engine) for engine in ok),
        "adapter_parents": parents or None,
    }


def served_ids(engines):
    """``(base model ids, {adapter id: parent id})`` the engines' ``served`` lists name (SPEC 16.1).

    An entry with a ``parent`` is a LoRA adapter of that base model; one
    without is a model the engine serves. At most ``MAX_LORAS`` adapters.
    """
    bases, parents = set(), {}
    for engine in engines:
        served = engine.get("served")
        for entry in served if isinstance(served, list) else ():
            if not isinstance(entry, dict):
                continue
            name, parent = text(entry.get("id"), MODEL_LENGTH), text(entry.get("parent"), MODEL_LENGTH)
            if not name:
                continue
            if parent:
                if len(parents) < MAX_LORAS:
                    parents.setdefault(name, parent)
            else:
                bases.add(name)
    return bases, parents


def _kv_events_ok(engine):
    """Whether an engine's KV-cache events are read with status ok (SPEC 15.2's ``kv_events``)."""
    events = engine.get("kv_events")
    return isinstance(events, dict) and events.get("status") == OK


def _running_loras(engines):
    """Sorted, distinct names of the LoRA adapters the ``ok`` engines run (``lora.running``), at most ``MAX_LORAS``."""
    names = set()
    for engine in engines:
        lora = engine.get("lora")
        running = lora.get("running") if isinstance(lora, dict) else None
        for name in running if isinstance(running, list) else ():
            name = text(name, MODEL_LENGTH)
            if name:
                names.add(name)
    return sorted(names)[:MAX_LORAS]


def figures_by_model(engines):
    """``{model: figures}`` of a snapshot's ``ok`` engines, read as ``engine_columns`` reads them, for
    ``/metrics``: the engines of one model (data parallel) summed, KV usage and TTFT the worst; "" for
    engines that name no model."""
    groups = {}
    for engine in engines if isinstance(engines, list) else ():
        if isinstance(engine, dict) and _status(engine) == OK:
            groups.setdefault(text(engine.get("model"), MODEL_LENGTH) or "", []).append(engine)
    return {model: {
        "requests_waiting": _sum(_count(engine.get("requests_waiting")) for engine in listed),
        "requests_running": _sum(_count(engine.get("requests_running")) for engine in listed),
        "kv_cache_usage_ratio": _max(_ratio(engine.get("kv_cache_usage_ratio")) for engine in listed),
        "ttft_p95_s": _max(_nonnegative(engine.get("ttft_p95_s")) for engine in listed),
    } for model, listed in groups.items()}


def _nonnegative(value):
    value = number(value)
    return value if value is not None and value >= 0 else None


def engine_pressure(requests_waiting, kv_cache_usage_ratio, waiting_scale, kv_scale):
    """An engine's pressure: max(waiting ÷ W, KV usage ÷ K), a missing figure (NaN) counting as 0.

    Over numbers or numpy columns alike: the one formula behind placement's pressure (SPEC 14.1) and,
    capped at 1, the pool summary's saturation (SPEC 13, ``saturation``).
    """
    return np.maximum(missing_as_zero(requests_waiting) / waiting_scale,
                      missing_as_zero(kv_cache_usage_ratio) / kv_scale)


def missing_as_zero(values):
    """NaN as 0, anything else as it is (``np.nan_to_num`` also caps infinities, which no checked figure is, at
    ~4× the cost: placement computes pressures twice a request)."""
    return np.where(np.isnan(values), 0.0, values)


def saturation(requests_waiting, kv_cache_usage_ratio, waiting_scale, kv_scale):
    """An engine's saturation: ``engine_pressure`` capped at 1."""
    return np.minimum(1.0, engine_pressure(requests_waiting, kv_cache_usage_ratio, waiting_scale, kv_scale))


def model_counts(groups):
    """``(model, instances, requests_waiting_total)`` of the pool summary's ``models``, from
    ``(engine_models, instances, requests_waiting_total)`` groups.

    An instance serving several models counts under each, with its whole
    queue (its snapshot does not say which model the queue is for). At most
    ``MAX_MODELS``, most instances first, then by name.
    """
    counts = {}
    for models, instances, waiting in groups:
        for model in models or ():
            counted, queued = counts.get(model, (0, None))
            if waiting is not None:
                queued = (queued or 0) + int(waiting)
            counts[model] = (counted + instances, queued)
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    return [(model, instances, waiting) for model, (instances, waiting) in ranked[:MAX_MODELS]]
