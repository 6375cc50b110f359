"""The Proxy's dashboards (SPEC 8): ``/pool/`` and ``/pool/instances/<id>/``, with the fragments they poll.

Each view reads its parameters, calls one function of ``proxy_app.dashboard``
and renders; fragments re-render one region of a page for htmx.
"""

from django.http import JsonResponse
from django.urls import reverse
from django_htmx.http import push_url

from controlplane import clock
from controlplane.pages.access import dashboard_page
from controlplane.pages.charts import POOL_CHARTS, chart, range_choice
from controlplane.pages.layout import id_url, not_found_page, render_page
from controlplane.pages.lists import PER_PAGE_CHOICES, pager_context
from controlplane.series.history import RANGES
from proxy_app import dashboard
from proxy_app.dashboard import PoolQuery

FILTER_FORM_ID = "pool-filters"

INSTANCE_CHARTS = (
    chart("CPU", "%", [("cpu_util", "CPU")], 100),
    chart("Memory used", "%", [("memory_used_ratio", "memory")], 100),
    chart("GPU utilisation", "%", [("gpu_util_avg", "average"), ("gpu_util_max", "busiest GPU")], 100),
    chart("GPU memory used", "%", [("gpu_mem_used_ratio", "GPU memory")], 100),
    chart("Network", "Mbit/s", [("network_rx_mbps", "rx"), ("network_tx_mbps", "tx")]),
)


def _rows_context(query, now):
    rows, page = dashboard.pool_rows(query, now)
    instance_url = id_url("pool-instance")
    for row in rows:
        row["url"] = instance_url(row["instance_id"])
    return {
        "rows": rows,
        "query": query,
        "now": now,
        "pager": pager_context(query, page, reverse("pool"), reverse("pool-rows"), "#pool-rows"),
        "rows_url": reverse("pool-rows") + query.urlencode(),
    }


@dashboard_page
def pool_page(request):
    now = clock.now()
    query = PoolQuery.from_query(request.GET)
    chart_range = range_choice(request.GET)
    return render_page(request, "pool/page.html", {
        "nav": "pool",
        "now": now,
        "overview": dashboard.pool_overview(now),
        **_rows_context(query, now),
        "statuses": PoolQuery.STATUSES,
        "admissions": PoolQuery.ADMISSIONS,
        "sorts": PoolQuery.SORTS,
        "per_page_choices": PER_PAGE_CHOICES,
        "charts": POOL_CHARTS,
        "ranges": list(RANGES),
        "range": chart_range,
        "series_url": reverse("pool-series"),
    })


@dashboard_page
def pool_summary(request):
    """The summary cards of ``/pool/``."""
    now = clock.now()
    return render_page(request, "pool/_summary.html", {"now": now, "overview": dashboard.pool_overview(now)})


@dashboard_page
def pool_rows(request):
    """The instance table (or cards) of ``/pool/`` for the filters in the query string."""
    now = clock.now()
    query = PoolQuery.from_query(request.GET)
    response = render_page(request, "pool/_rows.html", _rows_context(query, now))
    if request.htmx.trigger == FILTER_FORM_ID:
        # The filter form asked: the address bar follows, so a reload or a shared link shows the same list.
        push_url(response, reverse("pool") + query.urlencode())
    return response


@dashboard_page
def pool_series(request):
    """The pool's stored series as chart columns (SPEC 9)."""
    return JsonResponse(dashboard.pool_series(range_choice(request.GET), clock.now()))


@dashboard_page
def instance_page(request, instance_id):
    now = clock.now()
    detail = dashboard.instance_detail(instance_id, now)
    if detail is None:
        return not_found_page(request, "instance", instance_id)
    return render_page(request, "pool/instance.html", {
        "nav": "pool",
        "now": now,
        "instance": detail,
        "live_url": reverse("pool-instance-live", args=[instance_id]),
        "charts": INSTANCE_CHARTS,
        "ranges": list(RANGES),
        "range": range_choice(request.GET),
        "series_url": reverse("pool-instance-series", args=[instance_id]),
    })


@dashboard_page
def instance_live(request, instance_id):
    """The live part of the instance page: status, resources down to each GPU, status changes."""
    now = clock.now()
    detail = dashboard.instance_detail(instance_id, now)
    if detail is None:
        return not_found_page(request, "instance", instance_id)
    return render_page(request, "pool/_instance_live.html", {
        "now": now, "instance": detail, "live_url": reverse("pool-instance-live", args=[instance_id]),
    })


@dashboard_page
def instance_series(request, instance_id):
    """One instance's stored series as chart columns; 404 for an instance never seen."""
    if not dashboard.instance_exists(instance_id):
        return JsonResponse({"ok": False, "error": "not_found"}, status=404)
    return JsonResponse(dashboard.instance_series(instance_id, range_choice(request.GET), clock.now()))
