"""The Scheduler's dashboards (SPEC 8): ``/fleet/`` and ``/fleet/proxies/<id>/``, with the fragments they poll.

Each view reads its parameters, calls one function of ``scheduler_app.dashboard``
and renders; fragments re-render one region of a page for htmx.
"""

from django.http import JsonResponse
from django.urls import reverse
from django_htmx.http import push_url

from controlplane import clock
from controlplane.pages.access import dashboard_page
from controlplane.pages.charts import POOL_CHARTS, range_choice
from controlplane.pages.layout import id_url, not_found_page, render_page
from controlplane.pages.lists import PER_PAGE_CHOICES, pager_context
from controlplane.series.history import RANGES
from scheduler_app import dashboard
from scheduler_app.dashboard import FleetQuery

FILTER_FORM_ID = "fleet-filters"


def _rows_context(query, now):
    rows, page = dashboard.fleet_rows(query, now)
    proxy_url = id_url("fleet-proxy")
    for row in rows:
        row["url"] = proxy_url(row["proxy_id"])
    return {
        "rows": rows,
        "query": query,
        "now": now,
        "pager": pager_context(query, page, reverse("fleet"), reverse("fleet-rows"), "#fleet-rows"),
        "rows_url": reverse("fleet-rows") + query.urlencode(),
    }


@dashboard_page
def fleet_page(request):
    now = clock.now()
    query = FleetQuery.from_query(request.GET)
    return render_page(request, "fleet/page.html", {
        "nav": "fleet",
        "now": now,
        "overview": dashboard.fleet_overview(now),
        **_rows_context(query, now),
        "statuses": FleetQuery.STATUSES,
        "admissions": FleetQuery.ADMISSIONS,
        "sorts": FleetQuery.SORTS,
        "per_page_choices": PER_PAGE_CHOICES,
    })


@dashboard_page
def fleet_summary(request):
    now = clock.now()
    return render_page(request, "fleet/_summary.html", {"now": now, "overview": dashboard.fleet_overview(now)})


@dashboard_page
def fleet_rows(request):
    now = clock.now()
    query = FleetQuery.from_query(request.GET)
    response = render_page(request, "fleet/_rows.html", _rows_context(query, now))
    if request.htmx.trigger == FILTER_FORM_ID:
        push_url(response, reverse("fleet") + query.urlencode())
    return response


@dashboard_page
def proxy_page(request, proxy_id):
    now = clock.now()
    detail = dashboard.proxy_detail(proxy_id, now)
    if detail is None:
        return not_found_page(request, "proxy", proxy_id)
    return render_page(request, "fleet/proxy.html", {
        "nav": "fleet",
        "now": now,
        "proxy": detail,
        "live_url": reverse("fleet-proxy-live", args=[proxy_id]),
        "charts": POOL_CHARTS,
        "ranges": list(RANGES),
        "range": range_choice(request.GET),
        "series_url": reverse("fleet-proxy-series", args=[proxy_id]),
    })


@dashboard_page
def proxy_live(request, proxy_id):
    now = clock.now()
    detail = dashboard.proxy_detail(proxy_id, now)
    if detail is None:
        return not_found_page(request, "proxy", proxy_id)
    return render_page(request, "fleet/_proxy_live.html", {
        "now": now, "proxy": detail, "live_url": reverse("fleet-proxy-live", args=[proxy_id]),
    })


@dashboard_page
def proxy_series(request, proxy_id):
    """A proxy's stored summaries as chart columns; 404 for a proxy not registered here."""
    if not dashboard.proxy_exists(proxy_id):
        return JsonResponse({"ok": False, "error": "not_found"}, status=404)
    return JsonResponse(dashboard.proxy_series(proxy_id, range_choice(request.GET), clock.now()))
