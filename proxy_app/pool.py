"""This pool as a whole: the Proxy's identity and its pool_resource (SPEC 5, 7)."""

from django.conf import settings
from django.db.models import Avg, Count, F, FloatField, Max, Min, Q, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least

from controlplane import clock
from controlplane.endpoints import liveness
from controlplane.endpoints.admission import Admission
from proxy_app.aggregation import build_pool_resource
from proxy_app.models import Instance, InstanceResource


def advertised_address():
    """(host, port) this Proxy registers with the Scheduler."""
    return settings.FLEETWATCH_ADVERTISE_HOST or "127.0.0.1", settings.FLEETWATCH_ADVERTISE_PORT or 8000


def advertised_url():
    host, port = advertised_address()
    return f"http://{host}:{port}"


def proxy_id():
    """``FLEETWATCH_PROXY_ID``, else ``hp_{advertise_host}:{advertise_port}`` (SPEC 7)."""
    host, port = advertised_address()
    return settings.FLEETWATCH_PROXY_ID or f"hp_{host}:{port}"


def default_scheduler_url():
    """``FLEETWATCH_SCHEDULER_URL``, else this process when it is the scheduler too; "" for none."""
    if settings.FLEETWATCH_SCHEDULER_URL:
        return settings.FLEETWATCH_SCHEDULER_URL.rstrip("/")
    if "scheduler" in settings.FLEETWATCH_ROLES:
        return advertised_url()
    return ""


def pool_totals(now):
    """The raw inputs of pool_resource as two SQL aggregates, constant in pool size.

    One over instances (counts and load), one over the resources of reporting
    instances only, so the wide resource rows are filtered by a WHERE once
    rather than by a FILTER clause per aggregate. The resource rows carry
    their instance's ``last_seen_at`` (kept by the database), so that one
    reads a single table: no join, and no plan for PostgreSQL to get wrong.
    """
    alive = liveness.alive_q(now, Instance.ttl_s())
    totals = Instance.objects.aggregate(
        total=Count("pk"),
        alive=Count("pk", filter=alive),
        inflight_total=Sum("inflight", filter=alive),
        inflight_reported=Count("inflight", filter=alive),
        qps_1m_total=Sum("qps_1m", filter=alive),
        qps_1m_reported=Count("qps_1m", filter=alive),
    )
    reporting = InstanceResource.objects.filter(
        liveness.alive_q(now, Instance.ttl_s()),
        resource_reported_at__isnull=False, has_raw_resource=True,
    )
    totals.update(reporting.aggregate(
        reporting=Count("pk"),
        **{state.value: Count("pk", filter=Q(admission_state=state)) for state in Admission},
        cpu_avg=Avg("cpu_util"),
        cpu_max=Max("cpu_util"),
        memory_used_mb=Sum("memory_used_mb"),
        memory_total_mb=Sum("memory_total_mb"),
        memory_free_ratio_min=Min("memory_free_ratio"),
        gpu_util_avg=Avg("gpu_util_avg"),
        gpu_util_max=Max("gpu_util_max"),
        gpu_mem_used_mb=Sum("gpu_mem_used_mb"),
        gpu_mem_total_mb=Sum("gpu_mem_total_mb"),
        gpu_count_total=Sum("gpu_count"),
        network_rx_mbps_total=Sum("network_rx_mbps"),
        network_tx_mbps_total=Sum("network_tx_mbps"),
        reported_at_min=Min("resource_reported_at"),
        reported_at_avg=Avg("resource_reported_at"),
        reported_at_max=Max("resource_reported_at"),
        **_engine_aggregates(),
    ))
    totals["engine_model_groups"] = _engine_model_groups(reporting) if totals["instances_with_engine"] else []
    return totals


def _saturation():
    """An instance's saturation (SPEC 13) in SQL: min(1, max(waiting / W, kv usage / K))."""
    waiting_scale = float(settings.FLEETWATCH_SATURATION_WAITING)
    kv_scale = float(settings.FLEETWATCH_SATURATION_KV)
    as_float = FloatField()
    waiting = Coalesce(F("requests_waiting"), Value(0), output_field=as_float) / Value(waiting_scale)
    usage = Coalesce(F("kv_cache_usage_ratio"), Value(0.0), output_field=as_float) / Value(kv_scale)
    return Least(Value(1.0), Greatest(waiting, usage, output_field=as_float), output_field=as_float)


def _engine_aggregates():
    """The pool's engine totals (SPEC 13), over the reporting instances' ``ok`` engines."""
    engine_ok = Q(engine_ok_count__gt=0)
    signal = engine_ok & (Q(requests_waiting__isnull=False) | Q(kv_cache_usage_ratio__isnull=False))
    return {
        "instances_with_engine": Count("pk", filter=Q(engine_count__gt=0)),
        "instances_engine_ok": Count("pk", filter=engine_ok),
        "requests_running_total": Sum("requests_running"),
        "requests_waiting_total": Sum("requests_waiting"),
        "kv_cache_usage_avg": Avg("kv_cache_usage_ratio"),
        "kv_cache_usage_max": Max("kv_cache_usage_ratio"),
        "kv_cache_capacity_tokens_total": Sum("kv_cache_capacity_tokens"),
        "ttft_p95_max_s": Max("ttft_p95_s"),
        "saturation": Avg(_saturation(), filter=signal),
    }


def _engine_model_groups(reporting):
    """(models, instances, requests waiting) per distinct model set of the reporting instances."""
    groups = (reporting.filter(engine_models__isnull=False).values("engine_models")
              .annotate(instances=Count("pk"), waiting=Sum("requests_waiting")).order_by())
    return [(group["engine_models"], group["instances"], group["waiting"]) for group in groups]


def pool_resource(now=None):
    """The pool summary sent to the scheduler, computed fresh with SQL aggregates."""
    now = clock.now() if now is None else now
    return build_pool_resource(
        pool_totals(now), now=now, ttl_s=Instance.ttl_s(), capacity=settings.FLEETWATCH_PROXY_CAPACITY,
        proxy_id=proxy_id(),
    )
