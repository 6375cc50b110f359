"""The SQL of the pool summary (SPEC 5, 13), built once per database vendor.

``proxy_app.pool`` is the only caller. Three statements, each one table and
no join: the instances (counts and load), the resources of the reporting
instances (their ``last_seen_at`` is the database's copy of the instance's,
``InstanceResource.last_seen_at``), and, only when some instance has
engines, the model sets. The resource table has no index on
``last_seen_at``, so whatever PostgreSQL's statistics say about the
cut-off, each of them is one scan of its table.

The statements are cached text with parameters (the cut-off, the admission
words, the saturation scales): building ~35 ORM aggregate expressions cost
more per read than SQLite's scan of 10,000 rows.
"""

import functools

import orjson
from django.db import connection

from controlplane.endpoints import liveness
from controlplane.endpoints.admission import Admission
from proxy_app.models import Instance, InstanceResource


def _q(name):
    return connection.ops.quote_name(name)


def _select(aggregates):
    return ", ".join(f"{expression} AS {_q(alias)}" for alias, expression in aggregates)


@functools.lru_cache(maxsize=4)
def instances_sql(vendor):
    """Counts and load over every instance; parameters: ``alive_since`` five times."""
    alive = f"FILTER (WHERE {liveness.alive_sql(_q('last_seen_at'))})"
    inflight, qps = _q("inflight"), _q("qps_1m")
    aggregates = (
        ("total", "COUNT(*)"),
        ("alive", f"COUNT(*) {alive}"),
        ("inflight_total", f"SUM({inflight}) {alive}"),
        ("inflight_reported", f"COUNT({inflight}) {alive}"),
        ("qps_1m_total", f"SUM({qps}) {alive}"),
        ("qps_1m_reported", f"COUNT({qps}) {alive}"),
    )
    return f"SELECT {_select(aggregates)} FROM {_q(Instance._meta.db_table)}"


def _reporting():
    """The resource rows of alive instances that sent a non-empty snapshot; parameter: ``alive_since``."""
    return (f"FROM {_q(InstanceResource._meta.db_table)} WHERE {liveness.alive_sql(_q('last_seen_at'))} "
            f"AND {_q('has_raw_resource')} AND {_q('resource_reported_at')} IS NOT NULL")


def _saturation(vendor):
    """An instance's saturation (SPEC 13): min(1, max(waiting / W, kv usage / K)); parameters: W, K."""
    least, greatest = ("MIN", "MAX") if vendor == "sqlite" else ("LEAST", "GREATEST")
    waiting = f"COALESCE({_q('requests_waiting')}, 0) * 1.0 / %s"
    usage = f"COALESCE({_q('kv_cache_usage_ratio')}, 0.0) / %s"
    signal = (f"{_q('engine_ok_count')} > 0 AND ({_q('requests_waiting')} IS NOT NULL "
              f"OR {_q('kv_cache_usage_ratio')} IS NOT NULL)")
    return f"AVG({least}(1.0, {greatest}({waiting}, {usage}))) FILTER (WHERE {signal})"


@functools.lru_cache(maxsize=4)
def resources_sql(vendor):
    """The reporting instances' figures; parameters: the three admission words, W, K, ``alive_since``."""
    def agg(function, column):
        return f"{function}({_q(column)})"

    def count_where(condition):
        return f"COUNT(*) FILTER (WHERE {condition})"

    admission = [(state.value, count_where(f"{_q('admission_state')} = %s")) for state in Admission]
    aggregates = (
        ("reporting", "COUNT(*)"),
        *admission,
        ("cpu_avg", agg("AVG", "cpu_util")),
        ("cpu_max", agg("MAX", "cpu_util")),
        ("memory_used_mb", agg("SUM", "memory_used_mb")),
        ("memory_total_mb", agg("SUM", "memory_total_mb")),
        ("memory_free_ratio_min", agg("MIN", "memory_free_ratio")),
        ("gpu_util_avg", agg("AVG", "gpu_util_avg")),
        ("gpu_util_max", agg("MAX", "gpu_util_max")),
        ("gpu_mem_used_mb", agg("SUM", "gpu_mem_used_mb")),
        ("gpu_mem_total_mb", agg("SUM", "gpu_mem_total_mb")),
        ("gpu_count_total", agg("SUM", "gpu_count")),
        ("network_rx_mbps_total", agg("SUM", "network_rx_mbps")),
        ("network_tx_mbps_total", agg("SUM", "network_tx_mbps")),
        ("reported_at_min", agg("MIN", "resource_reported_at")),
        ("reported_at_avg", agg("AVG", "resource_reported_at")),
        ("reported_at_max", agg("MAX", "resource_reported_at")),
        # The pool's engine totals (SPEC 13), over the reporting instances' ``ok`` engines.
        ("instances_with_engine", count_where(f"{_q('engine_count')} > 0")),
        ("instances_engine_ok", count_where(f"{_q('engine_ok_count')} > 0")),
        ("requests_running_total", agg("SUM", "requests_running")),
        ("requests_waiting_total", agg("SUM", "requests_waiting")),
        ("kv_cache_usage_avg", agg("AVG", "kv_cache_usage_ratio")),
        ("kv_cache_usage_max", agg("MAX", "kv_cache_usage_ratio")),
        ("kv_cache_capacity_tokens_total", agg("SUM", "kv_cache_capacity_tokens")),
        ("ttft_p95_max_s", agg("MAX", "ttft_p95_s")),
        ("saturation", _saturation(vendor)),
    )
    return f"SELECT {_select(aggregates)} {_reporting()}"


@functools.lru_cache(maxsize=4)
def model_groups_sql(vendor):
    """(models, instances, requests waiting) per distinct model set; parameter: ``alive_since``."""
    models = _q("engine_models")
    return (f"SELECT {models}, COUNT(*), SUM({_q('requests_waiting')}) {_reporting()} "
            f"AND {models} IS NOT NULL GROUP BY {models}")


def _one_row(sql, params):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        return dict(zip(names, cursor.fetchone()))


def pool_totals(now, ttl_s, waiting_scale, kv_scale):
    """The raw inputs of pool_resource (``proxy_app.aggregation.build_pool_resource``)."""
    since = liveness.alive_since(now, ttl_s)
    vendor = connection.vendor
    totals = _one_row(instances_sql(vendor), [since] * 5)
    totals.update(_one_row(resources_sql(vendor),
                           [*Admission.values, float(waiting_scale), float(kv_scale), since]))
    groups = []
    if totals["instances_with_engine"]:
        with connection.cursor() as cursor:
            cursor.execute(model_groups_sql(vendor), [since])
            groups = [(orjson.loads(models), instances, waiting) for models, instances, waiting in cursor.fetchall()]
    totals["engine_model_groups"] = groups
    return totals
