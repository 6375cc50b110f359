"""The proxy → scheduler link (SPEC 7), run by ``manage.py run_link``.

Steps, one per loop turn (``ProxyLink.step``):

1. Not registered: POST ``/v1/proxy/register`` with a fresh pool_resource;
   take ``heartbeat_interval_s`` from the answer (fallback: the
   ``FLEETWATCH_PROXY_HEARTBEAT_S`` setting, 5 s by default).
2. Registered: POST ``/v1/proxy/heartbeat`` with a fresh pool_resource, the
   pool's load, and ``meta_patch`` when the meta changed since last sent.
3. A 404 means the scheduler forgot us (restart, wiped database): register
   again at once, without waiting.
4. A connection error, timeout or 5xx: wait with exponential backoff and
   jitter (the agent's ``Backoff``, from 0.5 s), capped at the heartbeat
   interval so that a scheduler that comes back sees this proxy again within
   one interval. The proxy's own API is another process and keeps serving
   meanwhile.
5. Every outcome is written to ``SchedulerLinkState`` for ``/debug/status``.
   Without a database (an outage) the link logs one warning, looks again
   every heartbeat interval, and logs one line when the database is back.
6. On shutdown: unregister, best effort.
"""

import logging
import random

import requests
from django.conf import settings
from django.db import close_old_connections

from agent.reporter import Backoff
from controlplane import clock
from controlplane.api.fields import MAX_INFLIGHT
from controlplane.db_outage import DATABASE_UNAVAILABLE, Outage
from proxy_app.models import SchedulerLinkState
from proxy_app.pool.summary import advertised_address, advertised_url, pool_resource, proxy_id

log = logging.getLogger("fleetwatch.link")

REQUEST_TIMEOUT_S = 5.0
OUTAGE = Outage("the scheduler link waits until it is back")


class SchedulerUnavailable(Exception):
    """The scheduler could not be reached or answered with a server error."""


class ProxyLink:
    def __init__(self, scheduler_url, *, session=None, rand=random.random, timeout=REQUEST_TIMEOUT_S):
        self.scheduler_url = scheduler_url.rstrip("/")
        self.session = session or requests.Session()
        if settings.FLEETWATCH_SCHEDULER_TOKEN:
            self.session.headers["Authorization"] = f"Bearer {settings.FLEETWATCH_SCHEDULER_TOKEN}"
        self.timeout = timeout
        self.proxy_id = proxy_id()
        self.registered = False
        # Until a register answer says otherwise; it also caps the backoff.
        self.interval = float(settings.FLEETWATCH_PROXY_HEARTBEAT_S)
        self.backoff = Backoff(rand=rand)
        self.sent_meta = None

    @property
    def failures(self):
        """Failed turns since the last success."""
        return self.backoff.failures

    # --- what is sent -------------------------------------------------------

    def meta(self):
        return {
            "roles": list(settings.FLEETWATCH_ROLES),
            "proxy_url": advertised_url(),
            "capacity": settings.FLEETWATCH_PROXY_CAPACITY,
            # False: the capacity is the default, so its load ratio says nothing (the Scheduler's pages say so).
            "capacity_configured": settings.FLEETWATCH_PROXY_CAPACITY_CONFIGURED,
        }

    def load(self, summary):
        """The pool's load as the Scheduler's heartbeat takes it. The sum of ``inflight`` is bounded by the
        Scheduler's cap: one host's huge figure must not get every heartbeat of its pool refused (and the pool
        taken out of fleet placement as stale); the pool_resource still carries the sum as it is."""
        inflight = summary["load"]["inflight_total"]
        return {
            "inflight": None if inflight is None else min(inflight, MAX_INFLIGHT),
            "qps_1m": summary["load"]["qps_1m_total"],
            "gpu_util": summary["utilization"]["gpu_util_avg"],
        }

    def register_body(self, summary):
        host, port = advertised_address()
        return {
            "proxy_id": self.proxy_id,
            "host": host,
            "port": port,
            "meta": self.meta(),
            "max_capacity": settings.FLEETWATCH_PROXY_CAPACITY,
            "instance_count": summary["instances"]["alive"],
            "pool_resource": summary,
        }

    def heartbeat_body(self, summary):
        body = {"proxy_id": self.proxy_id, "pool_resource": summary}
        body.update({k: v for k, v in self.load(summary).items() if v is not None})
        meta = self.meta()
        if meta != self.sent_meta:
            body["meta_patch"] = meta
        return body

    # --- one turn -----------------------------------------------------------

    def post(self, path, body):
        try:
            response = self.session.post(self.scheduler_url + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise SchedulerUnavailable(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise SchedulerUnavailable(f"HTTP {response.status_code} from {path}")
        return response

    def step(self):
        """One attempt; returns the seconds to wait before the next.

        Without a database there is nothing to send and nowhere to record the
        outcome: the link says so once (``OUTAGE``) and looks again a heartbeat later.
        """
        close_old_connections()
        try:
            delay = self.attempt()
        except DATABASE_UNAVAILABLE as exc:
            OUTAGE.failed(exc)
            return self.interval
        OUTAGE.recovered()
        return delay

    def attempt(self):
        action = "heartbeat" if self.registered else "register"
        try:
            summary = pool_resource()
            if not self.registered:
                delay = self.register(summary)
            else:
                delay = self.heartbeat(summary)
        except SchedulerUnavailable as exc:
            return self.failed(action, str(exc))
        except DATABASE_UNAVAILABLE:
            raise
        except Exception as exc:  # the link must outlive any single bad turn
            log.exception("scheduler link: %s failed", action)
            return self.failed(action, f"{type(exc).__name__}: {exc}")
        return delay

    def register(self, summary):
        response = self.post("/v1/proxy/register", self.register_body(summary))
        if response.status_code != 200:
            return self.failed("register", f"HTTP {response.status_code}: {response.text[:200]}")
        answer = response.json()
        self.interval = float(answer.get("heartbeat_interval_s") or settings.FLEETWATCH_PROXY_HEARTBEAT_S)
        self.proxy_id = answer.get("proxy_id") or self.proxy_id
        self.registered = True
        self.sent_meta = self.meta()
        self.succeeded("register")
        log.info("scheduler link: registered %s with %s", self.proxy_id, self.scheduler_url)
        return self.interval

    def heartbeat(self, summary):
        body = self.heartbeat_body(summary)
        response = self.post("/v1/proxy/heartbeat", body)
        if response.status_code == 404:
            # The scheduler lost us: register again straight away.
            self.registered = False
            self.record("heartbeat", error="HTTP 404: proxy_id not registered; re-registering")
            log.warning("scheduler link: %s unknown to the scheduler, re-registering", self.proxy_id)
            return 0.0
        if response.status_code != 200:
            return self.failed("heartbeat", f"HTTP {response.status_code}: {response.text[:200]}")
        if "meta_patch" in body:
            self.sent_meta = body["meta_patch"]
        self.succeeded("heartbeat")
        return self.interval

    def unregister(self):
        if not self.registered:
            return False
        try:
            self.post("/v1/proxy/unregister", {"proxy_id": self.proxy_id})
        except SchedulerUnavailable as exc:
            self.record("unregister", error=str(exc))
            return False
        self.registered = False
        self.record("unregister", ok=True)
        return True

    # --- outcomes -----------------------------------------------------------

    def succeeded(self, action):
        if self.failures:
            log.info("scheduler link: %s ok after %d failures", action, self.failures)
        self.backoff.reset()
        self.record(action, ok=True)

    def failed(self, action, error):
        """Record a failed turn; returns the wait before the next, capped at the heartbeat interval."""
        self.backoff.cap_s = self.interval
        delay = self.backoff.next_delay()
        if self.failures == 1:
            log.warning("scheduler link: %s failed: %s", action, error)
        self.record(action, error=error)
        return delay

    def record(self, action, ok=False, error=""):
        now = clock.now()
        fields = {
            "scheduler_url": self.scheduler_url,
            "registered": self.registered,
            "heartbeat_interval_s": self.interval,
            "last_action": action,
            "last_attempt_at": now,
            "consecutive_failures": self.failures,
        }
        if ok:
            fields["last_ok_at"] = now
        if error:
            fields.update(last_error=error[:2000], last_error_at=now)
        SchedulerLinkState.objects.record(self.proxy_id, fields)

    # --- the loop -----------------------------------------------------------

    def run(self, stop):
        """Loop until ``stop`` (a threading.Event) is set, then unregister."""
        while not stop.is_set():
            delay = self.step()
            if delay > 0:
                stop.wait(delay)
        self.unregister()
