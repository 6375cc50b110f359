"""Charts of a stored series (SPEC 9): the range asked for, the columns a chart group draws, the pool's charts."""

import json

from controlplane.clock import AGE_UNITS
from controlplane.figures import as_percent, in_units
from controlplane.series.history import RANGES

DEFAULT_RANGE = "15m"


def range_choice(query):
    """The chart range asked for (``?range=``), the default for anything unknown."""
    value = query.get("range", DEFAULT_RANGE)
    return value if value in RANGES else DEFAULT_RANGE


# Figures stored as ratios, drawn as percent.
RATIOS = {"memory_used_ratio", "gpu_mem_used_ratio", "kv_cache_usage_ratio", "kv_cache_usage_max", "saturation"}


def series_chart_data(series, key, range_name, now):
    """A stored series (SPEC 9) over ``range_name`` as what a chart group draws, every figure it keeps; ≤ 2 queries
    (≤ 4 when the range holds no point).

    Ratios come out as percent. Pool series also get ``stale`` = total − alive,
    the count the original's charts show. ``empty`` is what a chart with no
    point in the range says instead of a line.
    """
    resolution_s, points = series.read(key, range_name, now)
    data = columns(points, series.figures, RATIOS)
    if "alive" in data and "total" in data:
        data["stale"] = [None if a is None or t is None else t - a for a, t in zip(data["alive"], data["total"])]
    empty = None if points else silence(series.last_point_at(key), now - RANGES[range_name], now)
    return {"range": range_name, "range_s": RANGES[range_name], "resolution_s": resolution_s, "now": now,
            "empty": empty, **data}


def silence(last_point_at, since, now):
    """Why a range holds no point, as true as the series knows it: no report ever, or none for how long
    (a host gone for 53 minutes is "no report for 53 min", not "no data yet")."""
    if last_point_at is None:
        return "no report yet"
    if last_point_at < since:
        return f"no report for {in_units(max(0.0, now - last_point_at), AGE_UNITS)}"
    return "no data in this range yet"


def columns(series_points, figures, ratios=()):
    """Series points (dicts, oldest first) as the columns a chart draws: ``{"t": [...], figure: [...]}``.

    The figures named in ``ratios`` are drawn in percent; nulls stay null.
    """
    out = {"t": [point["t"] for point in series_points]}
    for name in figures:
        values = [point.get(name) for point in series_points]
        out[name] = [as_percent(v) for v in values] if name in ratios else values
    return out


def chart(title, unit, series, maximum=None):
    """One chart of a chart group: its title and the spec the page script draws (``series``: (key, label)…)."""
    spec = {"unit": unit, "max": maximum, "series": [{"key": key, "label": label} for key, label in series]}
    return {"title": title, "unit": unit, "spec": json.dumps(spec)}


# The charts of a pool's series, the same on the Proxy's pool page and the Scheduler's proxy page.
POOL_CHARTS = (
    chart("CPU average", "%", [("cpu_avg", "CPU")], 100),
    chart("Memory used", "%", [("memory_used_ratio", "memory")], 100),
    chart("GPU utilisation", "%", [("gpu_util_avg", "GPU")], 100),
    chart("GPU memory used", "%", [("gpu_mem_used_ratio", "GPU memory")], 100),
    chart("Instances", "", [("alive", "alive"), ("stale", "stale"), ("with_resource", "reporting")]),
    chart("Network, all instances", "Mbit/s", [("network_rx_mbps_total", "rx"), ("network_tx_mbps_total", "tx")]),
    chart("Engine queue, all instances", "requests", [("requests_waiting_total", "waiting")]),
    chart("Engines: KV cache and saturation", "%", [("kv_cache_usage_max", "fullest KV cache"),
                                                    ("saturation", "saturation")], 100),
)
