"""The Proxy's checks of ``/readyz`` (``controlplane.ops.readiness``): its recorder and its link at work.

Both run as processes of their own and leave their trace in the database, so
any web process can tell: the recorder writes a pool row every
``FLEETWATCH_SERIES_INTERVAL_S``, the link its outcome after every attempt
(``SchedulerLinkState``). A check fails when that trace is older than a few
intervals (the process is not running, or is stuck); a link that runs but
cannot reach the Scheduler passes, with ``consecutive_failures`` and
``last_error`` saying so: this Proxy still serves its pool meanwhile.
"""

from django.conf import settings

from proxy_app.models import PoolResource, SchedulerLinkState
from proxy_app.pool.link import REQUEST_TIMEOUT_S
from proxy_app.pool.summary import default_scheduler_url, proxy_id

RECORDER_SLACK_INTERVALS = 5
LINK_SLACK_INTERVALS = 3


def recorder_max_age_s():
    return RECORDER_SLACK_INTERVALS * settings.FLEETWATCH_SERIES_INTERVAL_S + 1


def link_max_age_s(heartbeat_interval_s):
    return LINK_SLACK_INTERVALS * (heartbeat_interval_s or settings.FLEETWATCH_PROXY_HEARTBEAT_S) + REQUEST_TIMEOUT_S


def recorder_check(now):
    newest = PoolResource.objects.order_by("-t").values_list("t", flat=True).first()
    if newest is None:
        return {"ok": False, "error": "the recorder has written no pool row yet", "last_record_age_s": None}
    age = round(now - newest, 3)
    verdict = {"ok": age <= recorder_max_age_s(), "last_record_age_s": age}
    if not verdict["ok"]:
        verdict["error"] = f"the newest pool row is {age:.0f} s old (at most {recorder_max_age_s():.0f} s)"
    return verdict


def link_check(now):
    state = SchedulerLinkState.objects.filter(proxy_id=proxy_id()).first()
    if state is None or state.last_attempt_at is None:
        return {"ok": False, "error": "the link has not tried the Scheduler yet", "last_attempt_age_s": None}
    age = round(now - state.last_attempt_at, 3)
    limit = link_max_age_s(state.heartbeat_interval_s)
    verdict = {"ok": age <= limit, "last_attempt_age_s": age, "registered": state.registered,
               "consecutive_failures": state.consecutive_failures, "last_error": state.last_error or None}
    if not verdict["ok"]:
        verdict["error"] = f"the link's last attempt is {age:.0f} s old (at most {limit:.0f} s)"
    return verdict


def checks(now):
    """The recorder always; the link where this Proxy has a Scheduler to report to (as ``up`` starts it)."""
    found = {"recorder": recorder_check(now)}
    if default_scheduler_url():
        found["link"] = link_check(now)
    return found
