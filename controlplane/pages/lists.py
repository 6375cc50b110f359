"""A list page's parts: filters and sorts read from the query string, liveness in queries, paging.

``ListQuery`` parses a list page's filters from the query string without
ever failing (a bad value is the default) and orders its entries by one of
its ``Sort``s; ``paginate`` pages a queryset in two queries, whatever its
size.
"""

import math
from dataclasses import dataclass, fields, replace
from urllib.parse import urlencode

from django.db.models import Case, Count, F, IntegerField, Value, When

from controlplane.endpoints.admission import Admission
from controlplane.endpoints.liveness import Status, status_q
from controlplane.env import parse_int

PER_PAGE_CHOICES = (25, 50, 100, 200)
DEFAULT_PER_PAGE = 25
# The admission filter's word for an entry without one (no snapshot, no summary).
UNKNOWN_ADMISSION = "unknown"


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


@dataclass(frozen=True)
class Sort:
    """One way to sort a list: its label, its column (None: the liveness state, alive first) and
    whether the high values come first (the busiest, the newest); "reversed" flips it. Unknowns last."""

    label: str
    column: str | None = None
    high_first: bool = False

    def order(self, desc, state_rank):
        expression = state_rank if self.column is None else F(self.column)
        if self.high_first != desc:
            return expression.desc(nulls_last=True)
        return expression.asc(nulls_last=True)


STATE = Sort("state")


def _int(raw, default, minimum=1):
    value = parse_int(raw)
    return value if value is not None and value >= minimum else default


@dataclass(frozen=True)
class ListQuery:
    """A list page's filters, sort and page, read from and written back to a query string.

    Subclasses declare ``SORTS`` (key → ``Sort``) and may add fields; every
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

    SORTS = {"state": STATE}
    NOT_FILTERS = ("sort", "desc", "page", "per_page", "view")
    STATUSES = tuple(status.value for status in Status)
    ADMISSIONS = (*Admission.values, UNKNOWN_ADMISSION)

    @classmethod
    def sort_labels(cls):
        return {key: sort.label for key, sort in cls.SORTS.items()}

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

    def order_by(self, state_rank, pk_name):
        """ORDER BY of the chosen sort, ties broken by the entry's id."""
        return [self.SORTS[self.sort].order(self.desc, state_rank), F(pk_name).asc()]

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
