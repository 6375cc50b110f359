"""Every operation of /api/schema/, fuzzed with schemathesis against the WSGI app in this process.

The schema is the one the app serves at ``/api/schema/``; each operation is
one test, with valid and invalid requests (schemathesis' examples, coverage
and fuzzing phases). Requests carry a token of the scope the operation
needs (writes: ``instance`` or ``proxy``; reads: ``read``), so they get past
authentication to the views. Before each operation, a pool and a fleet with
a few minutes of history are made through the API, and the schema's examples
name their ids, so known-id answers (stored snapshots, history points at
full and minute resolution) are checked too.

Checks: no 5xx; every status code documented; every body, content type and
header as the schema says; schema-valid requests accepted, invalid ones
refused; undocumented methods a 405; no answer without a token.
Derandomized, bounded, time frozen.
"""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test.utils import override_settings
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from controlplane import clock
from controlplane.wsgi import application
from proxy_app.api.openapi import EXAMPLE_INSTANCE
from proxy_app.models import SchedulerLinkState
from proxy_app.ops import history as pool_history
from proxy_app.pool.summary import proxy_id
from scheduler_app.history import PROXY_POOLS
from scheduler_app.openapi import EXAMPLE_PROXY
from tests.factories import make_capabilities, make_gpu, make_pool_resource, make_snapshot

# Generated requests per operation in the fuzzing phase; the examples and
# coverage phases add their own, a bounded number per operation.
MAX_EXAMPLES = 40


@schemathesis.check
def not_a_server_error_but_a_verdict(ctx, response, case):
    """No 5xx, except a placement's 503 ``unavailable``: a verdict (nothing eligible, SPEC 14.1), not a failure."""
    if response.status_code == 503 and "placement" in case.path:
        body = response.json()
        if isinstance(body, dict) and body.get("verdict") == "unavailable":
            return None
    return not_a_server_error(ctx, response, case)


CHECKS = [
    # The answers: no 5xx (but a placement's verdict), and each as the schema documents it.
    not_a_server_error_but_a_verdict,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    # The requests: the schema says what is accepted (a valid request is not a 400,
    # an invalid one is), which methods a path serves (405 otherwise), and that a
    # token is needed (the same request without it is a 401).
    positive_data_acceptance,
    negative_data_rejection,
    unsupported_method,
    ignored_auth,
]

with override_settings(ALLOWED_HOSTS=["localhost"]):
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
schema.config.generation.update(
    # The API refuses NUL characters (PostgreSQL cannot store them): a 400 the
    # schema states in words, not worth spending examples on.
    allow_x00=False,
    # The test sends real tokens; generated ones would only ever be a 401.
    with_security_parameters=False,
)


@pytest.fixture
def wsgi_requests_in_the_test_transaction():
    """The WSGI handler serves requests on the test's connection, inside its transaction; like
    Django's test client, it must not close that connection at the end of a request."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fleet(api, frozen):
    """Three minutes of a pool (a reporting GPU host, a host that only heartbeats, one gone
    quiet) and of a fleet (one proxy sending summaries), recorded and partly folded into minutes."""
    register = {"host": "10.0.0.5", "port": 8000}
    api.post("/v1/instance/register", {"instance_id": "quiet-host:8000", **register})
    api.post("/v1/instance/register", {"instance_id": EXAMPLE_INSTANCE, **register,
                                        "capabilities": make_capabilities()})
    api.post("/v1/instance/register", {"instance_id": "cpu-host-2:8000", **register, "tags": ["cpu"]})
    api.post("/v1/proxy/register", {"proxy_id": EXAMPLE_PROXY, "host": "10.0.0.2", "port": 8002,
                                     "pool_resource": make_pool_resource()})
    for seq in range(12):
        snapshot = make_snapshot(cpu=10.0 + seq, gpus=[make_gpu(0, avg=50.0 + seq), make_gpu(1, ok=False)])
        assert api.post("/v1/instance/resource_snapshot", {
            "instance_id": EXAMPLE_INSTANCE, "snapshot": snapshot, "metadata": {"report_seq": seq},
        }).json() == {"ok": True}
        api.post("/v1/instance/heartbeat", {"instance_id": "cpu-host-2:8000", "inflight": seq, "qps_1m": None})
        api.post("/v1/proxy/heartbeat", {"proxy_id": EXAMPLE_PROXY, "pool_resource": make_pool_resource(cpu=seq)})
        pool_history.record()
        frozen.shift(15)
    for series in (pool_history.INSTANCES, pool_history.POOL, PROXY_POOLS):
        series.fold(clock.now() - 60)  # the last minute stays unfolded: read live
    # The recorder's and the link's latest traces, as a running `up` leaves them: /readyz answers 200
    # (its 503 is a server's state, which the not_a_server_error check would count as a failure).
    pool_history.record()
    SchedulerLinkState.objects.record(proxy_id(), {"scheduler_url": "http://localhost", "registered": True,
                                                        "last_attempt_at": clock.now(), "last_ok_at": clock.now()})


def scope_of(case):
    if case.method.upper() in ("GET", "HEAD"):
        return "read"
    if "placement" in case.path:
        return "route"
    return "proxy" if case.path.startswith("/v1/proxy/") else "instance"


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@pytest.mark.django_db
def test_it_answers_every_request_as_its_schema_says(case, api, fleet, settings, wsgi_requests_in_the_test_transaction):
    settings.ALLOWED_HOSTS = ["localhost"]
    case.call_and_validate(headers={"Authorization": f"Bearer {api.token(scope_of(case))}"}, checks=CHECKS)
