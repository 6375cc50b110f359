"""The pool page's "cached tokens: predicted against the engines'" panel (SPEC 16.4).

Routers report, with each request's outcome, the prompt tokens the engine
said it served from its cache (``cached_tokens``) and those placement
predicted for that instance (``predicted_cached_tokens``); the Instance rows
keep their totals. The ratio of the two, per instance and for the pool, says
how far placement's picture of the engines' caches is from what they did: 1
is exact; below 1, placement expected hits the engines did not have (evicted
blocks, a tokenizer or template that differs from the engine's); above 1, the
engines reused more than placement knew of.
"""

from django.db.models import Count, Q, Sum

from controlplane.figures import ratio
from proxy_app.models import Instance

SHOWN = 20  # instances listed, most predicted first


def audit_context():
    """The panel's figures: the pool's totals and ratio, and the instances with most predicted tokens (2 queries)."""
    reported = Instance.objects.filter(Q(cached_tokens_total__gt=0) | Q(predicted_cached_tokens_total__gt=0))
    totals = reported.aggregate(cached=Sum("cached_tokens_total"), predicted=Sum("predicted_cached_tokens_total"),
                                instances=Count("pk"))
    rows = [{"instance_id": instance_id, "cached": cached, "predicted": predicted, "ratio": ratio(cached, predicted)}
            for instance_id, cached, predicted in reported.order_by("-predicted_cached_tokens_total", "instance_id")
            .values_list("instance_id", "cached_tokens_total", "predicted_cached_tokens_total")[:SHOWN]]
    cached, predicted = totals["cached"] or 0, totals["predicted"] or 0
    return {"cache_audit": {"rows": rows, "cached": cached, "predicted": predicted,
                            "ratio": ratio(cached, predicted), "instances": totals["instances"]}}
