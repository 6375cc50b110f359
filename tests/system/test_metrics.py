"""/metrics under up's several web processes: every scrape sums every process's requests."""

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.live


def request_count(text, view):
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "fleetwatch_http_requests_total" and sample.labels.get("view") == view:
                return sample.value
    return 0


def test_it_counts_the_requests_of_every_web_process(servers):
    server = servers(roles="proxy")
    server.start()
    session_count = 40
    # New connections each time, so the requests spread over both workers.
    for _ in range(session_count):
        assert requests.get(server.url + "/debug/pool_resource", timeout=10).status_code == 200
    scrapes = {request_count(requests.get(server.url + "/metrics", timeout=10).text, "proxy-debug-pool-resource")
               for _ in range(6)}
    assert scrapes == {session_count}
