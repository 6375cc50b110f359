"""What every dashboard page shares (SPEC 8): who may see it, how it renders, how a list pages.

- ``dashboard_page``: the one access rule. With ``FLEETWATCH_AUTH`` on, a
  page (and every fragment or JSON view it polls) needs a logged-in staff
  user; off, anyone may look. ``staff_always=True`` asks for staff whatever
  the setting (pages that act on the host). Whoever may not look is sent to
  the admin login page: a browser navigation with a 302, a script request
  (htmx or the chart loader, both send ``HX-Request``) with an
  ``HX-Redirect`` header, so the whole page goes there rather than a login
  form landing inside a table.
- ``render_page`` adds what the base layout needs; ``not_found_page`` is the
  HTML 404 of a page whose id is unknown.
- ``ListQuery`` parses a list page's filters from the query string without
  ever failing (a bad value is the default), and ``paginate`` pages a
  queryset in two queries, whatever its size.
"""

import json
import math
from dataclasses import dataclass, fields, replace
from functools import wraps
from urllib.parse import quote, urlencode

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db.models import Case, Count, IntegerField, Value, When
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS
from django_htmx.http import HttpResponseClientRedirect

from controlplane.history import RANGES
from controlplane.liveness import Status, status_q

DEFAULT_RANGE = "15m"
PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 25


# --- access -----------------------------------------------------------------------


def may_look(user, staff_only):
    """Whether ``user`` may see a page: anyone when auth is off (unless ``staff_only``), else active staff."""
    if not (settings.FLEETWATCH_AUTH or staff_only):
        return True
    return bool(user.is_authenticated and user.is_active and user.is_staff)


def login_redirect(request):
    """Off to the admin login page, coming back to the page the user was on."""
    login_url = reverse("admin:login")
    if request.headers.get("HX-Request"):
        back_to = request.headers.get("HX-Current-URL") or request.get_full_path()
        current = getattr(request, "htmx", None)
        if current and current.current_url_abs_path:
            back_to = current.current_url_abs_path
        return HttpResponseClientRedirect(f"{login_url}?next={quote(back_to, safe='/')}")
    return redirect_to_login(request.get_full_path(), login_url)


def dashboard_page(view=None, *, staff_always=False):
    """Decorate a page view, or a fragment/JSON view a page polls, with the dashboards' access rule."""

    def decorate(view_func):
        @wraps(view_func)
        def guarded(request, *args, **kwargs):
            if not may_look(request.user, staff_always):
                return login_redirect(request)
            return view_func(request, *args, **kwargs)

        guarded.dashboard_staff_always = staff_always
        return guarded

    return decorate(view) if view is not None else decorate


# --- rendering --------------------------------------------------------------------


def layout_context(request):
    """What ``base.html`` needs: the roles this process serves (for the navigation)."""
    roles = settings.FLEETWATCH_ROLES
    return {
        "serves_proxy": "proxy" in roles,
        "serves_scheduler": "scheduler" in roles,
        "auth_on": bool(settings.FLEETWATCH_AUTH),
    }


def render_page(request, template, context, status=200):
    return render(request, template, {**layout_context(request), **context}, status=status)


def not_found_page(request, what, name):
    """The HTML 404 of a dashboard page: ``what`` ("instance", "proxy") ``name`` is not known here."""
    return render_page(request, "404.html", {"what": what, "name": name}, status=404)


def id_url(name):
    """``reverse(name, args=[id])`` for many ids at the cost of one ``reverse``.

    A list page links every row to its entry's page; reversing a ``<path:>``
    route for each row cost as much as the rest of the row. The id is quoted
    exactly as ``reverse`` quotes it.
    """
    marker = "ID-PLACEHOLDER"
    prefix, _, suffix = reverse(name, args=[marker]).partition(marker)
    safe = RFC3986_SUBDELIMS + "/~:@"
    return lambda entry_id: f"{prefix}{quote(str(entry_id), safe=safe)}{suffix}"


def range_choice(query):
    """The chart range asked for (``?range=``), the default for anything unknown."""
    value = query.get("range", DEFAULT_RANGE)
    return value if value in RANGES else DEFAULT_RANGE


# --- liveness in list queries -----------------------------------------------------


def status_counts_aggregates(now, ttl_s, heartbeat_interval_s):
    """``aggregate()`` arguments counting entries per status at ``now``."""
    return {
        "total": Count("pk"),
        **{status.value: Count("pk", filter=status_q(status, now, ttl_s, heartbeat_interval_s)) for status in Status},
    }


def status_rank(now, ttl_s, heartbeat_interval_s):
    """0 for alive, 1 for suspect, 2 for stale: an ORDER BY term for "sort by state"."""
    return Case(
        When(status_q(Status.ALIVE, now, ttl_s, heartbeat_interval_s), then=Value(0)),
        When(status_q(Status.SUSPECT, now, ttl_s, heartbeat_interval_s), then=Value(1)),
        default=Value(2),
        output_field=IntegerField(),
    )


# --- lists: filters in the query string, paging -------------------------------------


def _int(raw, default, minimum=1):
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return default
    return value if value >= minimum else default


@dataclass(frozen=True)
class ListQuery:
    """A list page's filters, sort and page, read from and written back to a query string.

    Subclasses declare ``SORTS`` (key → label) and may add fields; every
    field is a string, a bool or an int, and unknown values fall back to the
    default, so a hand-edited URL never answers an error.
    """

    status: str = ""
    admission: str = ""
    q: str = ""
    sort: str = "state"
    desc: bool = False
    page: int = 1
    per_page: int = DEFAULT_PER_PAGE

    SORTS = {}
    NOT_FILTERS = ("sort", "desc", "page", "per_page", "view")
    STATUSES = tuple(status.value for status in Status)
    ADMISSIONS = ()

    @classmethod
    def from_query(cls, query):
        values = {}
        for field in fields(cls):
            raw = query.get(field.name)
            if raw is None:
                continue
            if field.type in (bool, "bool"):
                values[field.name] = raw.lower() in ("1", "true", "on", "yes")
            elif field.type in (int, "int"):
                values[field.name] = _int(raw, field.default)
            else:
                values[field.name] = raw.strip()[:200]
        parsed = cls(**values)
        return parsed.cleaned()

    def cleaned(self):
        """The same query with every unknown choice set back to its default."""
        changes = {}
        if self.status not in self.STATUSES:
            changes["status"] = ""
        if self.admission not in self.ADMISSIONS:
            changes["admission"] = ""
        if self.sort not in self.SORTS:
            changes["sort"] = type(self).sort
        if self.per_page not in PER_PAGE_CHOICES:
            changes["per_page"] = DEFAULT_PER_PAGE
        return replace(self, **changes) if changes else self

    def params(self, **changes):
        """The query as ``{name: value}`` without defaults, with ``changes`` applied."""
        query = replace(self, **changes)
        out = {}
        for field in fields(query):
            value = getattr(query, field.name)
            if value == field.default:
                continue
            out[field.name] = ("1" if value else "0") if isinstance(value, bool) else value
        return out

    def urlencode(self, **changes):
        params = self.params(**changes)
        return f"?{urlencode(params)}" if params else ""

    @property
    def filtered(self):
        """Whether anything narrows the list (the empty-state message differs)."""
        return any(getattr(self, f.name) != f.default for f in fields(self) if f.name not in self.NOT_FILTERS)


@dataclass(frozen=True)
class PageInfo:
    number: int
    pages: int
    count: int
    per_page: int

    @property
    def first_index(self):
        return 0 if self.count == 0 else (self.number - 1) * self.per_page + 1

    @property
    def last_index(self):
        return min(self.count, self.number * self.per_page)

    @property
    def has_previous(self):
        return self.number > 1

    @property
    def has_next(self):
        return self.number < self.pages


def paginate(queryset, number, per_page):
    """``(items, PageInfo)`` of one page: a COUNT and one query for the page, whatever the list's size.

    The page's rows are picked by a narrow subquery (primary keys, sorted,
    LIMIT/OFFSET) and only those rows are read in full: sorting thousands of
    wide rows to skip most of them made deep pages slow. A page past the end
    shows the last one.
    """
    count = queryset.count()
    pages = max(1, math.ceil(count / per_page))
    number = min(max(1, number), pages)
    start = (number - 1) * per_page
    page_keys = queryset.values("pk")[start:start + per_page]
    return list(queryset.filter(pk__in=page_keys)), PageInfo(number, pages, count, per_page)


# Figures stored as ratios, drawn as percent.
AS_PERCENT = {"memory_used_ratio": 100, "gpu_mem_used_ratio": 100}


def series_chart_data(series, key, range_name, now):
    """A stored series (SPEC 9) over ``range_name`` as what a chart group draws, every figure it keeps; ≤ 2 queries.

    Ratios come out as percent. Pool series also get ``stale`` = total − alive,
    the count the original's charts show.
    """
    resolution_s, points = series.read(key, range_name, now)
    data = columns(points, series.figures, AS_PERCENT)
    if "alive" in data and "total" in data:
        data["stale"] = [None if a is None or t is None else t - a for a, t in zip(data["alive"], data["total"])]
    return {"range": range_name, "range_s": RANGES[range_name], "resolution_s": resolution_s, "now": now, **data}


def columns(series_points, figures, scale=None):
    """Series points (dicts, oldest first) as the columns a chart draws: ``{"t": [...], figure: [...]}``.

    ``scale`` maps a figure to a factor (ratios drawn as percent); nulls stay null.
    """
    scale = scale or {}
    out = {"t": [point["t"] for point in series_points]}
    for name in figures:
        factor = scale.get(name)
        values = [point.get(name) for point in series_points]
        out[name] = [None if v is None else (v * factor if factor else v) for v in values]
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
)


def pager_context(query, page, page_url, rows_url, target):
    """What ``components/pager.html`` needs to link the previous and next pages of ``query``."""
    return {
        "page": page,
        "prev_query": query.urlencode(page=page.number - 1),
        "next_query": query.urlencode(page=page.number + 1),
        "page_url": page_url,
        "rows_url": rows_url,
        "target": target,
    }
