"""The pool's answers declared once (SPEC 5, 7, 13): pool_resource and the link's state, each key with its
type and description for the schema, and where its builder reads its value (``controlplane.api.rows``).

``pool_resource`` is not a row of a query: its values are the totals
``proxy_app.pool.columns`` reduces and the rules of
``proxy_app.pool.aggregation`` over them, named here key by key, and
``POOL_RESOURCE`` (a ``RowShape``'s ``answer_builder``) takes those totals as
its keyword values. A total added, dropped or renamed without its key here
is a ``TypeError`` on the first summary. The one part that is a list of
entries (``engine.models``, one per model the pool serves, as many as there
are) is built by its own declaration, ``PoolEngineModel``, entry by entry.

``/debug/pool_resource`` publishes these serializers (``proxy_app.api.openapi``),
and the link, the pages and the recorder read what ``pool_resource()`` builds from them.
"""

import operator

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from controlplane.api.rows import RowShape, always, reads
from controlplane.api.schema.answers import nullable_integer, nullable_number
from controlplane.api.schema.parts import Const
from controlplane.endpoints.admission import Admission
from controlplane.figures import ratio
from proxy_app.ingest.engines import model_counts
from proxy_app.models import SchedulerLinkState
from proxy_app.pool import aggregation as rules
from proxy_app.pool.aggregation import SCHEMA_VERSION, UNAVAILABLE

QUALITY = ["missing", "partial", "complete"]
ADMISSION = Admission.values
NO_QUEUE = "Always null: this project has no request queue."


def count(column=None, using=None):
    """A count of instances (≥ 0): the total of its own name, or ``using(column)``."""
    field = serializers.IntegerField(min_value=0)
    return reads(field, column, using=using) if column else field


PoolInstances = type("PoolInstances", (serializers.Serializer,), {
    "__doc__": "Counts: stale = total − alive; missing_resource = alive − with_resource; the admission "
               "states count reporting instances.",
    "total": count(), "alive": count(),
    "stale": reads(count(), "total", "alive", using=operator.sub),
    "with_resource": count("reporting"),
    "missing_resource": reads(count(), "alive", "reporting", using=operator.sub),
    **{state: count() for state in ADMISSION},
})


class PoolLoad(serializers.Serializer):
    inflight_total = reads(nullable_integer("Sum over alive instances; null when none reports it."),
                           "inflight_total", using=rules.int_or_none)
    qps_1m_total = nullable_number("Sum over alive instances; null when none reports it.")
    capacity = reads(serializers.IntegerField(help_text="FLEETWATCH_PROXY_CAPACITY; 0 when unset."), "capacity",
                     using=rules.count_or_zero)
    load_ratio = reads(nullable_number("inflight_total / capacity; null without either."),
                       "inflight_total", "capacity", using=rules.load_ratio)
    prepare_queue_depth = always(nullable_integer(NO_QUEUE), None)
    ready_queue_depth = always(nullable_integer(NO_QUEUE), None)
    queue_pressure = always(nullable_number(NO_QUEUE), None)


UTILIZATION = ("cpu_avg", "cpu_max", "memory_used_mb", "memory_total_mb", "memory_used_ratio",
               "memory_free_ratio_min", "gpu_util_avg", "gpu_util_max", "gpu_mem_used_mb", "gpu_mem_total_mb",
               "gpu_mem_used_ratio", "network_rx_mbps_total", "network_tx_mbps_total")
RATIOS = {"memory_used_ratio": ("memory_used_mb", "memory_total_mb"),
          "gpu_mem_used_ratio": ("gpu_mem_used_mb", "gpu_mem_total_mb")}
PoolUtilization = type("PoolUtilization", (serializers.Serializer,), {
    "__doc__": "Over reporting instances; each null when none has the input, a ratio null over a zero.",
    **{name: reads(nullable_number(), *RATIOS[name], using=ratio) if name in RATIOS else nullable_number()
       for name in UTILIZATION},
    "gpu_count_total": reads(nullable_integer(), "gpu_count_total", using=rules.int_or_none),
})
# now − the reports' stamps: the freshest is the latest stamp.
FRESHNESS = {"min": "reported_at_max", "avg": "reported_at_avg", "max": "reported_at_min"}
PoolFreshness = type("PoolFreshness", (serializers.Serializer,), {
    "__doc__": "now − resource_reported_at over reporting instances, seconds; all null when none.",
    **{name: reads(nullable_number(), "now", stamp, using=rules.age) for name, stamp in FRESHNESS.items()},
})


def source(*columns, using=None, value=None):
    """Where a value came from: ``using(*columns)``, or always ``value``."""
    field = serializers.CharField()
    return reads(field, *columns, using=using) if using else always(field, value)


class PoolMetricSource(serializers.Serializer):
    """Where each value came from, or `unavailable` when it is null for lack of data."""

    instances = source(value="proxy_instance_pool_ttl")
    resource = source("reporting", using=rules.resource_source)
    inflight_total = source("inflight_total", using=rules.load_source)
    qps_1m_total = source("qps_1m_total", using=rules.load_source)
    load_ratio = source("inflight_total", "capacity", using=rules.load_ratio_source)
    capacity = source(value="proxy_config")
    prepare_queue_depth = source(value=UNAVAILABLE)
    ready_queue_depth = source(value=UNAVAILABLE)
    queue_pressure = source(value=UNAVAILABLE)
    utilization = source("reporting", using=rules.resource_source)
    pool_admission_state = source("reporting", using=rules.admission_source)
    resource_freshness_s = source("reporting", using=rules.freshness_source)
    engine = source("instances_engine_ok", using=rules.engine_source)


@extend_schema_field({"type": "string", "enum": QUALITY, "description": "q(p, e) of SPEC 5: `missing` if e ≤ 0 or "
                      "p ≤ 0, `complete` if p ≥ e, else `partial`."}, component_name="Coverage")
class Coverage(serializers.CharField):
    pass


class PoolMetricQuality(serializers.Serializer):
    """How much of each metric the pool's instances gave."""

    resource = reads(Coverage(help_text="q(with_resource, alive)."), "reporting", "alive", using=rules.quality)
    load = reads(Coverage(help_text="q(non-null inflight + non-null qps, 2 × alive)."),
                 "inflight_reported", "qps_1m_reported", "alive", using=rules.load_quality)
    queue = always(Coverage(help_text="Always `missing`: this project has no request queue."), "missing")
    engine = reads(Coverage(help_text="q(instances with an ok engine, alive)."), "instances_engine_ok", "alive",
                   using=rules.quality)


class PoolEngineModel(serializers.Serializer):
    model = serializers.CharField()
    instances = serializers.IntegerField(min_value=0)
    requests_waiting_total = nullable_integer("The whole queue of each instance serving the model.")


MODEL_ENTRY = RowShape(PoolEngineModel, json_as_text=False).answer_builder()


def engine_models(engine_model_groups, instances_with_engine):
    """``models``: one entry per model (``model_counts``), null when no reporting instance has an engine."""
    if not instances_with_engine:
        return None
    return [MODEL_ENTRY(model=model, instances=instances, requests_waiting_total=waiting)
            for model, instances, waiting in model_counts(engine_model_groups)]


class PoolEngine(serializers.Serializer):
    """The serving engines of the pool (SPEC 13), over reporting instances' `ok` engines; null where no input."""

    instances_with_engine = reads(serializers.IntegerField(min_value=0), "instances_with_engine",
                                  using=rules.count_or_zero)
    requests_running_total = reads(nullable_integer(), "requests_running_total", using=rules.int_or_none)
    requests_waiting_total = reads(nullable_integer(), "requests_waiting_total", using=rules.int_or_none)
    kv_cache_usage_avg = nullable_number()
    kv_cache_usage_max = nullable_number()
    kv_cache_capacity_tokens_total = reads(nullable_integer(), "kv_cache_capacity_tokens_total",
                                           using=rules.int_or_none)
    ttft_p95_max_s = nullable_number()
    saturation = nullable_number("Mean of min(1, max(waiting ÷ FLEETWATCH_SATURATION_WAITING, kv usage ÷ "
                                 "FLEETWATCH_SATURATION_KV)) over instances with an ok engine.")
    models = reads(PoolEngineModel(many=True, allow_null=True, help_text="Up to 32, most instances first."),
                   "engine_model_groups", "instances_with_engine", using=engine_models)


ADMISSION_INPUTS = ("alive", "reporting", *ADMISSION)


class PoolResourceSummary(serializers.Serializer):
    """The compact pool summary (SPEC 5) this Proxy computes and sends to the Scheduler."""

    schema_version = Const(SCHEMA_VERSION)
    proxy_id = serializers.CharField()
    generated_at = reads(serializers.FloatField(help_text="Epoch seconds."), "now")
    ttl_s = serializers.IntegerField()
    instances = PoolInstances()
    load = PoolLoad()
    utilization = PoolUtilization()
    resource_freshness_s = PoolFreshness()
    pool_admission_state = reads(serializers.ChoiceField(choices=ADMISSION), *ADMISSION_INPUTS,
                                 using=rules.admission, item=0)
    pool_admission_reason = reads(serializers.CharField(help_text="\"<a> accepting, <d> degraded, <r> rejecting, "
                                                                  "<alive> alive\"."),
                                  *ADMISSION_INPUTS, using=rules.admission, item=1)
    engine = PoolEngine()
    metric_source = PoolMetricSource()
    metric_quality = PoolMetricQuality()


POOL_RESOURCE = RowShape(PoolResourceSummary, json_as_text=False).answer_builder()


def build_pool_resource(totals, *, now, ttl_s, capacity, proxy_id):
    """pool_resource of ``totals`` (``PoolColumns.totals``' keys, every one of them) at ``now``."""
    return POOL_RESOURCE(**totals, now=now, ttl_s=ttl_s, capacity=capacity, proxy_id=proxy_id)


# --- the link's state (SPEC 7) ------------------------------------------------------------------------


class SchedulerLink(serializers.Serializer):
    """The last outcome of this Proxy's link to the Scheduler (SPEC 7)."""

    proxy_id = serializers.CharField()
    scheduler_url = serializers.CharField()
    registered = serializers.BooleanField()
    heartbeat_interval_s = nullable_number()
    last_action = serializers.CharField(allow_blank=True)
    last_attempt_at = nullable_number("Epoch seconds.")
    last_ok_at = nullable_number("Epoch seconds.")
    last_error_at = nullable_number("Epoch seconds.")
    last_error = reads(serializers.CharField(allow_null=True), "last_error", using=lambda text: text or None)
    consecutive_failures = serializers.IntegerField()


LINK_STATE = RowShape(SchedulerLink, json_as_text=False)


def link_status(proxy_id):
    """What ``/debug/status`` and the pool page show of the link of ``proxy_id``: None until it ran."""
    rows = LINK_STATE.builder()(LINK_STATE.query(SchedulerLinkState.objects.filter(proxy_id=proxy_id)))
    return rows[0] if rows else None
