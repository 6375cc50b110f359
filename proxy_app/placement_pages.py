"""The pool page's "where would a request go" panel: ``POST /v1/placement`` (SPEC 14.1) asked from a page.

The panel reads a small form (model, adapter, prompt size, session key, how
many candidates) from the query string, validates it with the API's own
serializer, and asks the process's placement board exactly as the API does
(``BOARD.decide`` and ``placement_body``), as a dry run: looking does not
count as a placement, so a page polling every second adds nothing to any
instance's pending requests. It shows what the API would answer: the
verdict, its reason and HTTP status, the destination header, the excluded
counts, and each candidate's pressure, queue, KV cache, signal age and
reasons. When shedding, the API sends no candidates; the panel still shows
the ranking, marked as held back.
"""

from urllib.parse import urlencode

from django.urls import reverse
from rest_framework.exceptions import ValidationError

from controlplane import clock
from controlplane.api.placement import destination
from controlplane.env import parse_int
from controlplane.figures import as_percent
from controlplane.pages.access import dashboard_page
from controlplane.pages.layout import id_url, render_page
from proxy_app.placement_api import candidate_answer, placement_body, request_of
from proxy_app.placement_board import BOARD
from proxy_app.serializers import PlacementSerializer

FIELDS = ("model", "adapter", "prompt_tokens", "session_key", "count")
COUNT_CHOICES = (3, 5, 10, 32)
DEFAULT_COUNT = 5


def form_of(query):
    """The panel's form as typed (strings, ``count`` an int from ``COUNT_CHOICES``)."""
    form = {name: (query.get(name) or "").strip()[:300] for name in FIELDS[:-1]}
    count = parse_int(query.get("count"))
    form["count"] = count if count in COUNT_CHOICES else DEFAULT_COUNT
    return form


def body_of(form):
    """``(data, error)``: the placement body the form asks for, validated as the API validates a body."""
    prompt = form["prompt_tokens"]
    body = {
        "model": form["model"] or None,
        "adapter": form["adapter"] or None,
        "prompt_tokens": (parse_int(prompt) if parse_int(prompt) is not None else prompt) if prompt else None,
        "session_key": form["session_key"] or None,
        "count": form["count"],
    }
    try:
        return PlacementSerializer().to_internal_value(body), None
    except ValidationError as error:
        return None, "; ".join(f"{field.replace('_', ' ')}: {' '.join(str(m) for m in messages)}"
                               for field, messages in error.detail.items())


def shown_row(answer, instance_url):
    return {**answer, "url": instance_url(answer["instance_id"]),
            "pressure_pct": None if answer["pressure"] is None else 100.0 * answer["pressure"],
            "kv_pct": as_percent(answer["kv_cache_usage_ratio"])}


def panel_context(query, now):
    """What ``pool/_placement_result.html`` shows for the query string ``query`` at ``now``."""
    form = form_of(query)
    asked = {name: value for name, value in form.items() if value not in ("", DEFAULT_COUNT)}
    context = {"form": form, "now": now, "refresh_url": reverse("pool-placement") + "?" + urlencode(asked)}
    data, error = body_of(form)
    if error is not None:
        return {**context, "error": error}
    decision = BOARD.decide(request_of(data), now, dry_run=True)
    answer = placement_body(decision, now)
    instance_url = id_url("pool-instance")
    # When shedding the API answers no candidates; the panel shows whom it would have ranked, held back.
    ranked = answer["candidates"] or [candidate_answer(ranked) for ranked in decision.ranked]
    return {
        **context,
        "answer": answer,
        "http_status": decision.verdict.http_status,
        "destination": destination(answer["candidates"]),
        "rows": [shown_row(row, instance_url) for row in ranked],
        "held_back": not answer["candidates"] and bool(ranked),
        "excluded": sorted(answer["excluded"].items(), key=lambda item: (-item[1], item[0])),
    }


def page_context(query, now):
    """The panel as the pool page first draws it: the form's choices (the models and adapters the pool
    serves) and the answer."""
    context = panel_context(query, now)  # refreshes the board when due: served() reads it as it is
    models, adapters = BOARD.served()
    chosen = context["form"]["model"]
    return {"placement": {**context, "models": models if not chosen or chosen in models else [chosen, *models],
                          "adapters": adapters, "count_choices": COUNT_CHOICES}}


@dashboard_page
def placement_fragment(request):
    """``/pool/placement``: the panel's answer for the form in the query string (the form and the refresh ask)."""
    return render_page(request, "pool/_placement_result.html", {"placement": panel_context(request.GET, clock.now())})
