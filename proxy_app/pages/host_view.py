"""An agent snapshot as the instance page shows it: a pure function, plain values out.

The stored ``raw_resource`` is what the agent sent (SPEC 2.2), from any agent
version, so every read is defensive like ``normalise``: a value that is not
a finite number is None (shown as "–"), a list that is not a list is empty,
and percentages are computed here once (``figures.percent``: used / total,
None when either is unknown or the total is not positive), so templates
only format.
"""

from controlplane.figures import percent
from proxy_app.ingest.lenient import integer, mapping, number, text

MAX_ITEMS = 256  # cores, interfaces, disks or GPUs shown; more is a broken snapshot


def _rows(value):
    return [row for row in value[:MAX_ITEMS] if isinstance(row, dict)] if isinstance(value, list) else []


def _words(value):
    """A list of reason words; None when the source said nothing (not the same as "none")."""
    if not isinstance(value, list):
        return None
    return [str(item) for item in value[:64] if isinstance(item, (str, int, float)) and str(item).strip()]


def _read(section, read, *names):
    """The members ``names`` of a snapshot's ``section``, each read with ``read`` (``number``, ``integer``)."""
    return {name: read(section.get(name)) for name in names}


def cpu_view(cpu):
    cores = cpu.get("per_core_pct")
    return {
        "util": number(cpu.get("utilization_pct")),
        **_read(cpu, number, "load1", "load5", "load15"),
        **_read(cpu, integer, "count_logical", "count_physical"),
        "cores": [number(v) for v in cores[:MAX_ITEMS]] if isinstance(cores, list) else [],
    }


def memory_view(memory):
    used, total = number(memory.get("used_mb")), number(memory.get("total_mb"))
    swap_used, swap_total = number(memory.get("swap_used_mb")), number(memory.get("swap_total_mb"))
    return {
        "used_mb": used,
        "total_mb": total,
        "available_mb": number(memory.get("free_mb")),
        "used_pct": percent(used, total),
        "swap_used_mb": swap_used,
        "swap_total_mb": swap_total,
        "swap_pct": percent(swap_used, swap_total),
    }


def network_view(interface):
    return {
        "iface": text(interface.get("iface")),
        **_read(interface, number, "rx_mbps", "tx_mbps", "speed_mbps", "rx_bytes_total", "tx_bytes_total"),
    }


def disk_view(disk):
    used, total = number(disk.get("used_gb")), number(disk.get("total_gb"))
    return {"mount": text(disk.get("mount"), 1024), "used_gb": used, "total_gb": total,
            "used_pct": percent(used, total)}


def gpu_view(gpu):
    memory_used, memory_total = number(gpu.get("memory_used_mb")), number(gpu.get("memory_total_mb"))
    power, power_limit = number(gpu.get("power_w")), number(gpu.get("power_limit_w"))
    health = (text(gpu.get("health")) or "").lower() or None
    sample_ok = gpu.get("utilization_sample_ok")
    return {
        "index": integer(gpu.get("index")),
        "uuid": text(gpu.get("uuid")),
        "name": text(gpu.get("name")),
        "util": number(gpu.get("utilization_pct_avg", gpu.get("utilization_pct"))),
        "util_current": number(gpu.get("utilization_pct_current")),
        "util_max": number(gpu.get("utilization_pct_max")),
        "sample_count": integer(gpu.get("utilization_sample_count")),
        "window_ms": integer(gpu.get("utilization_window_ms")),
        "sample_ok": sample_ok if isinstance(sample_ok, bool) else None,
        "quality": text(gpu.get("utilization_sample_quality")),
        "error": text(gpu.get("utilization_error")),
        "memory_used_mb": memory_used,
        "memory_total_mb": memory_total,
        "memory_pct": percent(memory_used, memory_total),
        "temperature_c": number(gpu.get("temperature_c")),
        "power_w": power,
        "power_limit_w": power_limit,
        "power_pct": percent(power, power_limit),
        "sm_clock_mhz": number(gpu.get("sm_clock_mhz")),
        "mem_clock_mhz": number(gpu.get("mem_clock_mhz")),
        "ecc_uncorrected": integer(gpu.get("ecc_uncorrected_volatile")),
        "throttle_reasons": _words(gpu.get("throttle_reasons")),
        "health": health,
        "health_reasons": _words(gpu.get("health_reasons")) or [],
        "unhealthy": health not in (None, "ok"),
    }


def _shown_names(value):
    return [name for name in (text(item) for item in value[:MAX_ITEMS]) if name] if isinstance(value, list) else []


def lora_view(lora):
    if not isinstance(lora, dict):
        return None
    return {"max": integer(lora.get("max")), "running": _shown_names(lora.get("running")),
            "waiting": _shown_names(lora.get("waiting"))}


def engine_view(engine, snapshot_ts_ms):
    """One serving engine of the host (SPEC 13) as its card shows it."""
    status = (text(engine.get("status"), 32) or "").lower() or None
    scraped = integer(engine.get("scraped_at_ms"))
    usage, hits = number(engine.get("kv_cache_usage_ratio")), number(engine.get("prefix_cache_hit_ratio"))
    sleeping = engine.get("sleeping")
    return {
        "url": text(engine.get("url"), 1024),
        "kind": text(engine.get("kind"), 32),
        "model": text(engine.get("model")),
        "engine_index": text(engine.get("engine_index"), 64),
        "status": status,
        "ok": status == "ok",
        "error": text(engine.get("error"), 1024),
        "age_ms": max(0, snapshot_ts_ms - scraped) if scraped is not None and snapshot_ts_ms is not None else None,
        "scrape_ms": number(engine.get("scrape_ms")),
        **_read(engine, integer, "requests_running", "requests_waiting", "kv_cache_capacity_tokens", "preemptions",
                "window_ms"),
        "kv_pct": percent(usage, 1),
        "prefix_hit_pct": percent(hits, 1),
        **_read(engine, number, "prompt_tokens_per_s", "generation_tokens_per_s", "ttft_p50_s", "ttft_p95_s",
                "itl_p50_s"),
        "lora": lora_view(engine.get("lora")),
        "sleeping": sleeping if isinstance(sleeping, bool) else None,
    }


def host_view(raw_resource):
    """Everything the instance page draws from one snapshot; empty parts for an empty snapshot."""
    snapshot = mapping(raw_resource)
    devices = mapping(snapshot.get("devices"))
    hint = mapping(snapshot.get("capacity_hint"))
    gpus = [gpu_view(gpu) for gpu in _rows(devices.get("gpu"))]
    return {
        "has_snapshot": bool(snapshot),
        "hostname": text(snapshot.get("hostname")),
        "agent_version": text(snapshot.get("agent_version")),
        "timestamp_ms": integer(snapshot.get("timestamp_ms")),
        "gpu_status": text(snapshot.get("gpu_status")),
        "cpu": cpu_view(mapping(devices.get("cpu"))),
        "memory": memory_view(mapping(devices.get("memory"))),
        "network": [network_view(row) for row in _rows(devices.get("network"))],
        "disks": [disk_view(row) for row in _rows(devices.get("disk"))],
        "gpus": gpus,
        "unhealthy_gpus": sum(1 for gpu in gpus if gpu["unhealthy"]),
        "admission_reasons": _words(hint.get("admission_reasons")) or [],
        # None: the agent reads no engine; []: it was told of engines and listed none.
        "engines": ([engine_view(row, integer(snapshot.get("timestamp_ms"))) for row in _rows(snapshot.get("engines"))]
                    if isinstance(snapshot.get("engines"), list) else None),
    }
