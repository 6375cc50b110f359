"""The pool page's "where would a request go" panel: ``POST /v1/placement`` (SPEC 14.1) asked from a page.

The form (model, adapter, prompt size or a chat message, session key, how many candidates) is
validated with the endpoint's own serializer and answered by this process's
placement board exactly as the endpoint answers (``placement_request``, ``decide`` and
``answer_of``), as a dry run: looking does not count as a placement,
so a page polling every second adds nothing to any instance's pending
requests. ``controlplane.pages.placement`` has what the fleet's panel shares.
"""

from django.urls import reverse

from controlplane import clock
from controlplane.figures import as_percent
from controlplane.pages import placement
from controlplane.pages.access import dashboard_page
from controlplane.pages.layout import id_url, render_page
from proxy_app.api.placement import answer_of, candidate_answer, decide, placement_request
from proxy_app.api.serializers import PLACEMENT_BODY
from proxy_app.placement.candidates import BOARD

TEXT_FIELDS = ("model", "adapter", "prompt_tokens", "session_key", "prefix", "message")
# The shared-prefix choice (SPEC 15.5): a prompt of the typed length whose token ids are one of these fixed
# sequences (``shared_prompt``), so two asks with the same choice share their prefix; blank: no prompt.
SHARED_PREFIXES = (("", "no prompt"), ("a", "shared prefix A"), ("b", "shared prefix B"), ("c", "shared prefix C"))
DEFAULT_PROMPT_TOKENS = 4096
MAX_PROMPT_TOKENS = 131_072


def shared_prompt(choice, tokens):
    """The token ids of shared prefix ``choice`` ("a", "b", "c"), ``tokens`` long: a fixed sequence per choice
    (what a router asking with the same choice would send, and learned mode then finds)."""
    offset = 1 + "abc".index(choice) * 1000
    return [(offset + 7 * i) % 30_000 for i in range(min(tokens, MAX_PROMPT_TOKENS))]


def shown_row(answer, instance_url):
    return {**answer, "url": instance_url(answer["instance_id"]),
            "pressure_pct": None if answer["pressure"] is None else 100.0 * answer["pressure"],
            "kv_pct": as_percent(answer["kv_cache_usage_ratio"])}


def panel_context(query, now):
    """What ``pool/_placement_result.html`` shows for the query string ``query`` at ``now``."""
    form = placement.form_of(query, TEXT_FIELDS)
    context = {"form": form, "now": now, "refresh_url": placement.refresh_url(reverse("pool-placement"), form)}
    body = {
        "model": form["model"] or None, "adapter": form["adapter"] or None,
        "prompt_tokens": placement.integer_or_text(form["prompt_tokens"]),
        "session_key": form["session_key"] or None, "count": form["count"],
    }
    if form["message"]:  # a user's chat message, keyed as the model's template and tokenizer make it (SPEC 16.3)
        body["messages"] = [{"role": "user", "content": form["message"]}]
    elif form["prefix"] in ("a", "b", "c"):
        length = body["prompt_tokens"] if isinstance(body["prompt_tokens"], int) else DEFAULT_PROMPT_TOKENS
        body["prompt_token_ids"] = shared_prompt(form["prefix"], max(0, length))
    data, error = placement.validated(PLACEMENT_BODY, body)
    if error is not None:
        return {**context, "error": error}
    request, prompt = placement_request(data)
    decision = decide(request, now, dry_run=True)
    shown = placement.answer_context(decision, answer_of(decision, prompt, now),
                                     [candidate_answer(ranked) for ranked in decision.ranked])
    instance_url = id_url("pool-instance")
    return {**context, **shown, "rows": [shown_row(row, instance_url) for row in shown["ranked"]],
            "with_prompt": decision.prompt_blocks is not None, "text_prompt": prompt}


def page_context(query, now):
    """The panel as the pool page first draws it: the form's choices (the models and adapters the pool
    serves) and the answer."""
    context = panel_context(query, now)  # refreshes the board when due: served() reads it as it is
    models, adapters = BOARD.served()
    chosen = context["form"]["model"]
    return {"placement": {**context, "models": models if not chosen or chosen in models else [chosen, *models],
                          "adapters": adapters, "count_choices": placement.COUNT_CHOICES,
                          "prefix_choices": SHARED_PREFIXES}}


@dashboard_page
def placement_fragment(request):
    """``/pool/placement``: the panel's answer for the form in the query string (the form and the refresh ask)."""
    return render_page(request, "pool/_placement_result.html", {"placement": panel_context(request.GET, clock.now())})
