"""Request bodies as clients send them, one object per call, with defaults a test overrides.

Plain functions, no database: ``make_snapshot`` and ``make_gpu`` (an agent's
``resource_snapshot_v1``), ``make_pool_resource`` (a Proxy's summary).
"""

# A fixed "now" far from any epoch edge: 2026-01-01T00:00:00Z.
T0 = 1767225600.0
T0_MS = 1767225600000


def make_snapshot(cpu=10.0, used_mb=2000.0, total_mb=8000.0, free_mb=6000.0, gpus=(), admission="accepting",
                  network=({"iface": "eth0", "rx_mbps": 1.0, "tx_mbps": 2.0, "speed_mbps": 10000},),
                  timestamp_ms=1767225600000, **extra):
    """A ``resource_snapshot_v1`` body as the agent sends it."""
    snapshot = {
        "schema_version": "resource_snapshot_v1",
        "agent_version": "test",
        "instance_id": "i-1",
        "timestamp_ms": timestamp_ms,
        "hostname": "gpu-host-1",
        "devices": {
            "cpu": {"utilization_pct": cpu, "load1": 0.5, "load5": 0.4, "load15": 0.3},
            "memory": {"used_mb": used_mb, "total_mb": total_mb, "free_mb": free_mb},
            "network": list(network),
            "gpu": list(gpus),
        },
        "runtime": {},
        "capacity_hint": {
            "memory_free_ratio": round(free_mb / total_mb, 4) if free_mb is not None and total_mb else None,
            "admission_state": admission,
        },
    }
    snapshot.update(extra)
    return snapshot


def make_engine(**fields):
    """One object of a snapshot's ``engines`` (SPEC 13) as the agent reports it: a healthy vLLM engine
    unless told otherwise."""
    engine = {
        "url": "http://127.0.0.1:8001", "kind": "vllm", "model": "tiny", "engine_index": "0", "status": "ok",
        "error": None, "scraped_at_ms": T0_MS - 300, "scrape_ms": 4.2, "requests_running": 4, "requests_waiting": 8,
        "kv_cache_usage_ratio": 0.25, "kv_cache_capacity_tokens": 4096, "prefix_cache_hit_ratio": None,
        "preemptions": 0, "prompt_tokens_per_s": 12.0, "generation_tokens_per_s": 40.0, "ttft_p50_s": 0.2,
        "ttft_p95_s": 0.9, "itl_p50_s": 0.05, "window_ms": 10000, "lora": None, "sleeping": False,
    }
    engine.update(fields)
    return engine


def make_failed_engine(status, **fields):
    """An engine whose scrape failed: its status and error, every figure null (SPEC 13)."""
    figures = dict.fromkeys(("requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens",
                             "prefix_cache_hit_ratio", "prompt_tokens_per_s", "generation_tokens_per_s", "ttft_p50_s",
                             "ttft_p95_s", "itl_p50_s", "scrape_ms", "lora", "sleeping", "preemptions"))
    return make_engine(**{"status": status, "error": f"{status}: boom", "model": None, "kind": None, **figures,
                          **fields})


def make_gpu(index=0, avg=50.0, current=None, peak=None, used=1000.0, total=80000.0, ok=True, **extra):
    gpu = {
        "index": index,
        "uuid": f"GPU-{index}",
        "name": "NVIDIA H100",
        "utilization_pct": avg,
        "utilization_pct_current": avg if current is None else current,
        "utilization_pct_avg": avg,
        "utilization_pct_max": avg if peak is None else peak,
        "utilization_sample_count": 5,
        "utilization_window_ms": 5000,
        "utilization_sample_ok": ok,
        "utilization_source": "nvml",
        "memory_used_mb": used,
        "memory_total_mb": total,
        "memory_free_mb": None if used is None or total is None else total - used,
        "temperature_c": 40,
        "power_w": 100.0,
        "health": "ok",
    }
    gpu.update(extra)
    return gpu


def make_pool_resource(alive=2, total=2, cpu=20.0, gpu=50.0, memory_used_ratio=0.25, admission="accepting", **extra):
    """A pool_resource (SPEC 5 shape, trimmed) as a proxy sends it."""
    summary = {
        "schema_version": 1,
        "proxy_id": "pxy-a",
        "generated_at": 1767225600.0,
        "ttl_s": 30,
        "instances": {"total": total, "alive": alive, "stale": total - alive},
        "utilization": {"cpu_avg": cpu, "gpu_util_avg": gpu, "memory_used_ratio": memory_used_ratio},
        "pool_admission_state": admission,
    }
    summary.update(extra)
    return summary


def make_capabilities(**overrides):
    """An ``InstanceCapability`` object as the original CacheRoute Instance registers it (SPEC 3.2)."""
    capabilities = {
        "schema_version": "1",
        "model": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": "main"},
        "tokenizer": {"identifier": "meta-llama/Llama-3.1-8B-Instruct", "revision": None},
        "adapters": [{"identifier": "sql-lora", "revision": "v2", "configuration": {"r": 8}, "configuration_hash": None}],
        "kv_cache": {"layout": "paged", "schema_version": "1", "dtype": "bfloat16", "block_size": 16},
        "parallelism": {"tensor_parallel_size": 2, "pipeline_parallel_size": 1, "data_parallel_size": None},
        "runtime": {"vllm_version": "0.8.1", "lmcache_version": "0.2.0", "supported_cache_features": ["prefix"]},
    }
    capabilities.update(overrides)
    return capabilities
