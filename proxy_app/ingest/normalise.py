"""Normalise an agent snapshot into the columns of SPEC 3.1.

A pure function: no database, no clock. Snapshots come from many agent
versions, so every read is defensive: a value that is not a finite number is
null, never 0, and a malformed part never rejects the report.
"""

from controlplane.figures import MAX_DB_INT
from proxy_app.ingest.engines import engine_columns
from proxy_app.ingest.lenient import integer, mapping, number, text

INVALID_GPU_QUALITIES = {"invalid", "failed", "error", "command_error", "parse_error", "unsupported"}
# Per-GPU utilisation keys, in order of preference (window average first).
GPU_AVG_KEYS = ("utilization_pct_avg", "utilization_pct", "utilization_gpu_pct", "gpu_util", "util")
GPU_QUALITY_KEYS = ("utilization_sample_quality", "sample_quality", "quality")


def _first_number(mapping, keys):
    for key in keys:
        value = number(mapping.get(key))
        if value is not None:
            return value
    return None


def gpu_is_valid(gpu):
    if gpu.get("utilization_sample_ok") is False:
        return False
    for key in GPU_QUALITY_KEYS:
        quality = gpu.get(key)
        if isinstance(quality, str) and quality.strip().lower() in INVALID_GPU_QUALITIES:
            return False
    return True


def _mean(values):
    return sum(values) / len(values) if values else None


def _present(values):
    return [v for v in values if v is not None]


def _sum_or_none(values):
    present = _present(values)
    return sum(present) if present else None


def _sample_quality(gpus, averages):
    """``ok`` when some valid GPU gave a utilisation (``averages``), else the first row's own word (SPEC 3.1)."""
    if averages:
        return "ok"
    if not gpus:
        return None
    first = gpus[0]
    quality = text(first.get("utilization_sample_quality"), 32)
    if quality:
        return quality
    return "ok" if first.get("utilization_sample_ok") is True else None


def _coverage(gpus, valid):
    """This project's verdict over every GPU row: ``ok``, ``partial`` or ``invalid``; null without rows."""
    if not gpus:
        return None
    if len(valid) == len(gpus):
        return "ok"
    return "partial" if valid else "invalid"


def _gpu_columns(devices, snapshot_ts_ms):
    listed = isinstance(devices.get("gpu"), list)
    gpus = [g for g in devices["gpu"] if isinstance(g, dict)] if listed else []
    # Each GPU row is read once: whether it is valid, its window average, its sample count.
    validity = [gpu_is_valid(g) for g in gpus]
    valid = [g for g, ok in zip(gpus, validity) if ok]
    valid_averages = [_first_number(g, GPU_AVG_KEYS) for g in valid]
    averages = _present(valid_averages)
    currents = _present(number(g.get("utilization_pct_current")) for g in valid)
    maxima = []
    for gpu, average in zip(valid, valid_averages):
        peak = number(gpu.get("utilization_pct_max"))
        if peak is None:
            peak = average
        if peak is not None:
            maxima.append(peak)
    # The sample fields are the original's: over every GPU row, valid or not.
    sample_counts = [integer(g.get("utilization_sample_count")) for g in gpus]
    counts = _present(sample_counts)
    stamps = _present(integer(g.get("utilization_sample_timestamp_ms")) for g in gpus)
    windows = _present(integer(g.get("utilization_window_ms")) for g in gpus)
    source = next((s for s in (text(g.get("utilization_source"), 64) for g in gpus) if s), None)
    age = None
    if stamps and snapshot_ts_ms is not None:
        age = max(0, snapshot_ts_ms - max(stamps))
    valid_counts = _present(count for count, ok in zip(sample_counts, validity) if ok)

    return {
        # No gpu list at all is "unknown"; an empty list is "measured: none".
        "gpu_count": len(valid) if listed else None,
        "gpu_util_avg": _mean(averages),
        "gpu_util_current": _mean(currents),
        "gpu_util_max": max(maxima) if maxima else None,
        "gpu_sample_count": _bounded(sum(counts)) if counts else None,
        "gpu_sample_age_ms": _bounded(age),
        "gpu_sample_source": source,
        "gpu_sample_quality": _sample_quality(gpus, averages),
        "gpu_sample_window_ms": max(windows) if windows else None,
        "gpu_mem_used_mb": _sum_or_none(number(g.get("memory_used_mb")) for g in gpus),
        "gpu_mem_total_mb": _sum_or_none(number(g.get("memory_total_mb")) for g in gpus),
        # This project's own verdicts: the weakest valid GPU's sample count,
        # and how many rows gave a usable sample.
        "gpu_sample_count_min": min(valid_counts) if valid_counts else None,
        "gpu_sample_coverage": _coverage(gpus, valid),
        # Placement and fencing read it (SPEC 14): GPUs whose health the agent reports as error.
        "gpu_error_count": sum(1 for g in gpus if _health(g) == "error") if listed else None,
    }


def _health(gpu):
    health = text(gpu.get("health"), 32)
    return health.lower() if health else None


def _bounded(value):
    """An integer that fits a BIGINT column, else null (sums and differences of accepted ints can overflow)."""
    return value if value is None or abs(value) <= MAX_DB_INT else None


def _first_interface(devices):
    network = devices.get("network")
    if isinstance(network, list):
        return next((i for i in network if isinstance(i, dict)), {})
    return mapping(network)


def normalise_snapshot(snapshot, metadata, received_at):
    """Columns of ``InstanceResource`` from one report (SPEC 3.1).

    ``received_at`` is the proxy's receive time in float epoch seconds.
    """
    snapshot = mapping(snapshot)
    metadata = mapping(metadata)
    devices = mapping(snapshot.get("devices"))
    cpu = mapping(devices.get("cpu"))
    memory = mapping(devices.get("memory"))
    hint = mapping(snapshot.get("capacity_hint"))
    interface = _first_interface(devices)
    timestamp_ms = integer(snapshot.get("timestamp_ms"))

    used = number(memory.get("used_mb"))
    total = number(memory.get("total_mb"))
    free = number(memory.get("free_mb"))
    free_ratio = number(hint.get("memory_free_ratio"))
    if free_ratio is None and free is not None and total:
        # Through number(): over a tiny total the quotient overflows to inf.
        free_ratio = number(round(free / total, 4))
    # Lower-cased before it is cut to the column's 32 characters: lower() can
    # lengthen text ("İ" becomes two characters), past what the column holds.
    admission = text(hint.get("admission_state"))
    admission = text(admission.lower(), 32) if admission else None

    columns = {
        "cpu_util": number(cpu.get("utilization_pct")),
        "memory_used_mb": used,
        "memory_total_mb": total,
        "memory_free_mb": free,
        "memory_free_ratio": free_ratio,
        **_gpu_columns(devices, timestamp_ms),
        "network_rx_mbps": number(interface.get("rx_mbps")),
        "network_tx_mbps": number(interface.get("tx_mbps")),
        **engine_columns(snapshot, timestamp_ms),
        "admission_state": admission,
        "resource_ts_ms": timestamp_ms,
        "resource_reported_at": float(received_at),
        "resource_report_monotonic_ms": integer(metadata.get("report_monotonic_ms")),
        "resource_report_wall_time_ms": integer(metadata.get("report_wall_time_ms")),
        "reported_instance_id": text(metadata.get("reported_instance_id")),
        "agent_snapshot_timestamp_ms": integer(metadata.get("agent_snapshot_timestamp_ms")),
        "report_seq": integer(metadata.get("report_seq")),
        "raw_resource": snapshot,
    }
    return columns


# The normalised fields, in the order the API shows them (raw_resource last).
RESOURCE_FIELDS = (
    "cpu_util", "memory_used_mb", "memory_total_mb", "memory_free_mb", "memory_free_ratio",
    "gpu_count", "gpu_util_avg", "gpu_util_current", "gpu_util_max", "gpu_sample_count",
    "gpu_sample_age_ms", "gpu_sample_source", "gpu_sample_quality", "gpu_sample_window_ms",
    "gpu_mem_used_mb", "gpu_mem_total_mb", "gpu_sample_count_min", "gpu_sample_coverage", "gpu_error_count",
    "network_rx_mbps", "network_tx_mbps",
    "engine_count", "engine_ok_count", "engine_status", "engine_models", "requests_running", "requests_waiting",
    "kv_cache_usage_ratio", "kv_cache_capacity_tokens", "ttft_p95_s", "engine_sample_age_ms", "engine_loras",
    "admission_state", "resource_ts_ms", "resource_reported_at", "resource_report_monotonic_ms",
    "resource_report_wall_time_ms", "reported_instance_id", "agent_snapshot_timestamp_ms",
    "report_seq",
)
