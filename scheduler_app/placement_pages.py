"""The fleet page's "which pool would a request go to" panel: ``POST /v1/proxy/placement`` (SPEC 14.3) from a page.

Pick a model (those the pools' summaries list) and how many pools: the
answer is this process's board of pools, asked exactly as the endpoint asks
it (``BOARD.decide`` and ``pool_placement_body``), as a dry run.
``controlplane.pages.placement`` has what the pool's panel shares.
"""

from django.urls import reverse

from controlplane import clock
from controlplane.figures import as_percent
from controlplane.pages import placement
from controlplane.pages.access import dashboard_page
from controlplane.pages.layout import id_url, render_page
from scheduler_app.models import Proxy
from scheduler_app.placement import PoolRequest
from scheduler_app.placement_api import BOARD, FIELDS, candidate_of, pool_candidate_answer, pool_placement_body
from scheduler_app.serializers import POOL_PLACEMENT_BODY


def served_models():
    """The models some proxy's latest summary lists, sorted, read as placement reads them: one query."""
    models = set()
    for row in Proxy.objects.values(*FIELDS):
        models |= candidate_of(row).models
    return sorted(models)


def panel_context(query, now):
    """What ``fleet/_placement_result.html`` shows for the query string ``query`` at ``now``."""
    form = placement.form_of(query, ("model",))
    context = {"form": form, "now": now, "refresh_url": placement.refresh_url(reverse("fleet-placement"), form)}
    data, error = placement.validated(POOL_PLACEMENT_BODY, {"model": form["model"] or None, "count": form["count"]})
    if error is not None:
        return {**context, "error": error}
    decision = BOARD.decide(PoolRequest(model=data["model"], count=data["count"]), now, dry_run=True)
    shown = placement.answer_context(decision, pool_placement_body(decision, now),
                                     [pool_candidate_answer(ranked) for ranked in decision.ranked])
    proxy_url = id_url("fleet-proxy")
    rows = [{**row, "url": proxy_url(row["proxy_id"]), "saturation_pct": as_percent(row["saturation"])}
            for row in shown["ranked"]]
    return {**context, **shown, "rows": rows}


def page_context(query, now):
    """The panel as the fleet page first draws it: the models to pick from, and the answer."""
    context = panel_context(query, now)
    models, chosen = served_models(), context["form"]["model"]
    return {"placement": {**context, "models": models if not chosen or chosen in models else [chosen, *models],
                          "count_choices": placement.COUNT_CHOICES}}


@dashboard_page
def placement_fragment(request):
    """``/fleet/placement``: the panel's answer for the form in the query string."""
    return render_page(request, "fleet/_placement_result.html",
                       {"placement": panel_context(request.GET, clock.now())})
