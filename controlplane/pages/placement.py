"""What both "where would a request go" panels share (SPEC 14.1 on ``/pool/``, 14.3 on ``/fleet/``).

A panel reads a small form from the query string, validates it with its
placement endpoint's own serializer, asks its role's board for a decision
as a dry run (looking is not placing) and shows what the endpoint would
answer. Here: the form's reading, the validation in words, and the part of
the answer both show (verdict, reason, HTTP status, destination header,
excluded counts, the ranking, held back when shedding);
``components/placement_verdict.html`` draws that part.
"""

from urllib.parse import urlencode

from rest_framework.exceptions import ValidationError

from controlplane.api.placement import destination
from controlplane.env import parse_int

COUNT_CHOICES = (3, 5, 10)
DEFAULT_COUNT = 5


def form_of(query, text_fields):
    """The form as typed: each of ``text_fields`` a stripped string, ``count`` one of ``COUNT_CHOICES``."""
    form = {name: (query.get(name) or "").strip()[:300] for name in text_fields}
    count = parse_int(query.get("count"))
    form["count"] = count if count in COUNT_CHOICES else DEFAULT_COUNT
    return form


def refresh_url(url, form):
    """The panel's own URL asking the same question (what it polls)."""
    asked = {name: value for name, value in form.items() if value not in ("", DEFAULT_COUNT)}
    return f"{url}?{urlencode(asked)}" if asked else url


def validated(body_checks, body):
    """``(data, error)``: ``body`` validated as the endpoint validates it (its ``BodyChecks``); the error in words."""
    try:
        return body_checks(body), None
    except ValidationError as error:
        return None, "; ".join(f"{field.replace('_', ' ')}: {' '.join(str(m) for m in messages)}"
                               for field, messages in error.detail.items())


def integer_or_text(text):
    """A typed number as an int, anything else as typed (for the serializer to refuse), blank as None."""
    if not text:
        return None
    number = parse_int(text)
    return number if number is not None else text


def answer_context(decision, body, ranked):
    """The shared part of a panel's answer: ``body`` as the endpoint answers it, and ``ranked`` (every
    ranked candidate as the endpoint writes one), which a shedding answer holds back."""
    return {
        "answer": body,
        "http_status": decision.verdict.http_status,
        "destination": destination(body["candidates"]),
        "ranked": ranked,
        "held_back": not body["candidates"] and bool(ranked),
        "excluded": sorted(body["excluded"].items(), key=lambda item: (-item[1], item[0])),
    }
