"""One entry dashboard that each control plane declares (after NetBox's ObjectListView and ObjectView).

A control plane's pages are a list of its entries (the Proxy's instances,
the Scheduler's proxies) and a page per entry, each with the fragments htmx
polls. An app subclasses ``EntryDashboard`` and declares:

- ``name``, the list (``pool``, ``fleet``): its URL names ``<name>``,
  ``<name>-summary``, ``<name>-rows`` (and ``<name>-series`` with a
  ``list_series``), its templates ``<name>/page.html``, ``_summary.html``
  and ``_rows.html``, its navigation entry and its filter form
  (``<name>-filters``);
- ``entry`` and ``entries``, one entry and the URL segment of many
  (``instance``, ``instances``): URL names ``<name>-<entry>``, ``-live`` and
  ``-series``, templates ``<name>/<entry>.html`` and ``<name>/_<entry>_live.html``,
  and the name the entry goes by in their context;
- ``model`` (a ``RegisteredEndpoint``), ``query`` (a ``ListQuery`` with its
  sorts), ``admission_field`` (the admission state the list filters on);
- what the charts draw: ``list_charts`` of ``list_series``, ``entry_charts``
  of ``entry_series``;
- the app's own figures: ``entries()`` (the queryset a list starts from),
  ``overview(now)``, ``rows(entries, now)`` and ``detail(entry_id, now)``;
  and, if it has panels of its own on the list page, ``list_panels(request, now)``.

The views, their one access rule, the URLs, the list's filtering, sorting and
paging, the status counts and changes, and the 404s are the kit's, the same
for both. Every view reads its parameters, gathers a constant number of
queries' worth of plain values and renders.
"""

from django.db.models import Q
from django.http import JsonResponse
from django.urls import path, reverse
from django_htmx.http import push_url

from controlplane import clock
from controlplane.endpoints.liveness import status_q
from controlplane.pages.access import dashboard_page
from controlplane.pages.charts import range_choice, series_chart_data
from controlplane.pages.layout import id_url, not_found_page, render_page
from controlplane.pages.lists import (
    PER_PAGE_CHOICES,
    UNKNOWN_ADMISSION,
    ListQuery,
    pager_context,
    paginate,
    status_counts_aggregates,
    status_rank,
)
from controlplane.series.history import RANGES

STATUS_CHANGES_SHOWN = 50


class EntryDashboard:
    """The list and entry pages of one control plane; see the module's docstring for what a subclass declares."""

    name = ""  # the list: its URL names, templates, navigation entry and filter form ("pool")
    entry = ""  # one entry: its URL names, templates and name in their context ("instance")
    entries = ""  # many entries: the URL segment before an id, the list's heading ("instances")
    model = None  # a RegisteredEndpoint
    query = ListQuery  # the list's filters and sorts
    admission_field = ""  # the admission state the list filters on, through a relation ("resource__…")
    admission_label = "Admission"
    list_charts, list_series = (), None  # the list's own series and its charts, if it has one
    entry_charts, entry_series = (), None  # an entry's

    # --- what an app declares -------------------------------------------------------

    def entries_queryset(self):
        """The entries a list starts from (before filters, sort and paging)."""
        return self.model.objects.all()

    def overview(self, now):
        """The summary cards' values."""
        raise NotImplementedError

    def rows(self, entries, now):
        """The rows (plain dicts, with the entry's id under its primary-key name) of one page of entries."""
        raise NotImplementedError

    def detail(self, entry_id, now):
        """Everything an entry's page shows, or None for an unknown id."""
        raise NotImplementedError

    # --- shared figures -------------------------------------------------------------

    @property
    def pk(self):
        return self.model._meta.pk.name

    def timing(self):
        return self.model.ttl_s(), self.model.heartbeat_interval_s()

    def status_counts(self, now):
        """Entries per status at ``now``, and in all: one query."""
        return self.model.objects.aggregate(**status_counts_aggregates(now, *self.timing()))

    def status_changes(self, entry_id):
        """An entry's newest status changes, as plain values."""
        changes = self.model.status_change_model.objects.filter(**{self.pk: entry_id})
        return list(changes.order_by("-at", "-id").values("old_status", "new_status", "reason", "at")
                    [:STATUS_CHANGES_SHOWN])

    def select(self, query, now):
        """The entries ``query`` selects, sorted: filters and order in SQL."""
        ttl_s, interval_s = self.timing()
        entries = self.entries_queryset()
        if query.status:
            entries = entries.filter(status_q(query.status, now, ttl_s, interval_s))
        if query.admission == UNKNOWN_ADMISSION:
            holder = self.admission_field.rsplit("__", 1)[0]
            entries = entries.filter(Q(**{f"{holder}__isnull": True}) | Q(**{f"{self.admission_field}__isnull": True}))
        elif query.admission:
            entries = entries.filter(**{self.admission_field: query.admission})
        entries = self.narrow(entries, query)
        if query.q:
            entries = entries.filter(Q(**{f"{self.pk}__icontains": query.q}) | Q(host__icontains=query.q))
        return entries.order_by(*query.order_by(status_rank(now, ttl_s, interval_s), self.pk))

    def narrow(self, entries, query):
        """The app's own filters of ``query`` (none unless declared)."""
        return entries

    def list_panels(self, request, now):
        """The context of the app's own panels on the list page (``{% block panels %}``), none unless declared."""
        return {}

    def exists(self, entry_id):
        return self.model.objects.filter(pk=entry_id).exists()

    # --- contexts ---------------------------------------------------------------------

    def url_name(self, *parts):
        return "-".join((self.name, *parts))

    def rows_context(self, query, now):
        entries, page = paginate(self.select(query, now), query.page, query.per_page)
        rows = self.rows(entries, now)
        entry_url = id_url(self.url_name(self.entry))
        for row in rows:
            row["url"] = entry_url(row[self.pk])
        rows_url = reverse(self.url_name("rows"))
        return {
            "dashboard": self,
            "rows": rows,
            "query": query,
            "now": now,
            "pager": pager_context(query, page, reverse(self.name), rows_url, f"#{self.url_name('rows')}"),
            "rows_url": rows_url + query.urlencode(),
        }

    def charts_context(self, request, charts, series_url):
        return {"charts": charts, "ranges": list(RANGES), "range": range_choice(request.GET), "series_url": series_url}

    # --- the views --------------------------------------------------------------------

    def list_page(self, request):
        now = clock.now()
        query = self.query.from_query(request.GET)
        context = {
            "nav": self.name,
            "now": now,
            "overview": self.overview(now),
            **self.rows_context(query, now),
            "statuses": self.query.STATUSES,
            "admissions": self.query.ADMISSIONS,
            "sorts": self.query.sort_labels(),
            "per_page_choices": PER_PAGE_CHOICES,
            **self.list_panels(request, now),
        }
        if self.list_series is not None:
            context.update(self.charts_context(request, self.list_charts, reverse(self.url_name("series"))))
        return render_page(request, f"{self.name}/page.html", context)

    def summary_fragment(self, request):
        """The summary cards of the list page."""
        now = clock.now()
        return render_page(request, f"{self.name}/_summary.html", {"now": now, "overview": self.overview(now)})

    def rows_fragment(self, request):
        """The list's rows for the filters in the query string."""
        query = self.query.from_query(request.GET)
        response = render_page(request, f"{self.name}/_rows.html", self.rows_context(query, clock.now()))
        if request.htmx.trigger == self.url_name("filters"):
            # The filter form asked: the address bar follows, so a reload or a shared link shows the same list.
            push_url(response, reverse(self.name) + query.urlencode())
        return response

    def list_series_data(self, request):
        """The list's own stored series as chart columns (SPEC 9)."""
        return JsonResponse(series_chart_data(self.list_series, None, range_choice(request.GET), clock.now()))

    def entry_page(self, request, **kwargs):
        entry_id, now = kwargs[self.pk], clock.now()
        detail = self.detail(entry_id, now)
        if detail is None:
            return not_found_page(request, self.entry, entry_id)
        return render_page(request, f"{self.name}/{self.entry}.html", {
            "nav": self.name,
            "now": now,
            self.entry: detail,
            "live_url": reverse(self.url_name(self.entry, "live"), args=[entry_id]),
            **self.charts_context(request, self.entry_charts,
                                  reverse(self.url_name(self.entry, "series"), args=[entry_id])),
        })

    def entry_live(self, request, **kwargs):
        """The live part of an entry's page."""
        entry_id, now = kwargs[self.pk], clock.now()
        detail = self.detail(entry_id, now)
        if detail is None:
            return not_found_page(request, self.entry, entry_id)
        return render_page(request, f"{self.name}/_{self.entry}_live.html", {
            "now": now, self.entry: detail, "live_url": reverse(self.url_name(self.entry, "live"), args=[entry_id]),
        })

    def entry_series_data(self, request, **kwargs):
        """An entry's stored series as chart columns; 404 for an entry not known here."""
        entry_id = kwargs[self.pk]
        if not self.exists(entry_id):
            return JsonResponse({"ok": False, "error": "not_found"}, status=404)
        return JsonResponse(series_chart_data(self.entry_series, entry_id, range_choice(request.GET), clock.now()))

    def urls(self):
        """The URL patterns of every page and fragment, each behind the dashboards' access rule.

        An id may hold any character, "/" included: an entry's page ends in
        "/", its fragments in a word without one, so they never take each
        other's URLs.
        """
        entry = f"{self.name}/{self.entries}/<path:{self.pk}>/"
        pages = [
            (f"{self.name}/", self.list_page, self.name),
            (f"{self.name}/summary", self.summary_fragment, self.url_name("summary")),
            (f"{self.name}/rows", self.rows_fragment, self.url_name("rows")),
        ]
        if self.list_series is not None:
            pages.append((f"{self.name}/series", self.list_series_data, self.url_name("series")))
        pages += [
            (entry, self.entry_page, self.url_name(self.entry)),
            (f"{entry}live", self.entry_live, self.url_name(self.entry, "live")),
            (f"{entry}series", self.entry_series_data, self.url_name(self.entry, "series")),
        ]
        return [path(route, dashboard_page(view), name=name) for route, view, name in pages]
