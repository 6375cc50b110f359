"""Every metric the Grafana dashboard (deploy/grafana/) and the Prometheus rules (deploy/prometheus/) query
is in a real scrape of a running ``up``: no panel or alert reads a family we do not export.

``up`` runs both roles (its link reports to itself, its recorder records),
and one instance reports a two-GPU snapshot with an engine, and a heartbeat
with its load, through the real API, so every family that has samples only for such hosts (GPU power,
XIDs, throttle reasons, engines) is there. Metric names are read from
each PromQL expression after removing what is not one: strings, label
matchers, range selectors, the label lists of ``by``/``on``/…, functions,
keywords, numbers and Grafana's ``$variables``.
"""

import json
import re
import time
from pathlib import Path

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import make_engine, make_gpu, make_snapshot
from tests.live import wait_for

pytestmark = pytest.mark.live
ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "fleetwatch.json"
RULES = ROOT / "deploy" / "prometheus" / "fleetwatch-rules.yml"
# Series Prometheus makes itself, not a target.
PROMETHEUS_OWN = {"up"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset",
            "inf", "nan"}


def metric_names(expr):
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\$\{?\w+\}?", " ", expr)  # Grafana variables
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):  # not the unit of "5m" or "1e3"
        name, rest = match.group(), expr[match.end():].lstrip()
        if rest.startswith("(") or name.lower() in KEYWORDS:
            continue
        names.add(name)
    return names


def dashboard_exprs():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs += [variable["definition"].replace("label_values(", "").split(",")[0]
              for variable in dashboard["templating"]["list"] if variable["type"] == "query"]
    return exprs


def rules():
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_extractor_reads_names_and_leaves_the_rest():
    expr = ('histogram_quantile(0.99, sum by (le, route) (rate(fleetwatch_http_request_duration_seconds_bucket'
            '{route=~"a|b"}[5m]))) > on (proxy_id) group_left (model) x:y:z offset 5m / $__rate_interval')
    assert metric_names(expr) == {"fleetwatch_http_request_duration_seconds_bucket", "x:y:z"}


def report_a_gpu_host(server):
    body = {"instance_id": "dash-gpu-1", "host": "10.0.0.9", "port": 8000}
    assert requests.post(server.url + "/v1/instance/register", json=body, timeout=10).status_code == 200
    gpus = [make_gpu(0, power_limit_w=700.0, sm_clock_mhz=1980, mem_clock_mhz=2619, ecc_uncorrected_volatile=0,
                     xid_count=1, xid_last=79, throttle_reasons=["sw_power_cap"]),
            make_gpu(1, health="degraded", throttle_reasons=[])]
    snapshot = make_snapshot(gpus=gpus, engines=[make_engine()], timestamp_ms=int(time.time() * 1000))
    report = {"instance_id": "dash-gpu-1", "snapshot": snapshot, "metadata": {"reported_instance_id": "dash-gpu-1"}}
    response = requests.post(server.url + "/v1/instance/resource_snapshot", json=report, timeout=10)
    assert response.status_code == 200, response.text
    beat = {"instance_id": "dash-gpu-1", "inflight": 3, "qps_1m": 1.5}  # the pool's load_ratio needs a load
    assert requests.post(server.url + "/v1/instance/heartbeat", json=beat, timeout=10).status_code == 200


def scraped_names(server):
    text = requests.get(server.url + "/metrics", timeout=30).text
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def test_every_queried_family_is_in_a_real_scrape(servers):
    # A capacity: without one the pool has no load_ratio, and no such sample (issue 47).
    server = servers(roles="proxy,scheduler", env={"FLEETWATCH_PROXY_CAPACITY": "8"}).start()
    report_a_gpu_host(server)
    needed = {"fleetwatch_fleet_pool_instances_alive", "fleetwatch_link_last_success_age_seconds",
              "fleetwatch_recorder_last_record_age_seconds", "fleetwatch_gpu_power_watts", "fleetwatch_pool_load_ratio"}
    scraped = wait_for(lambda: (names := scraped_names(server)) >= needed and names, timeout_s=60,
                       message="the link's, the recorder's and the GPU host's families in a scrape")
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    queried = {name for expr in dashboard_exprs() for name in metric_names(expr)}
    for rule in rules():
        queried |= metric_names(rule["expr"])
    assert len(queried) > 40
    missing = sorted(queried - scraped - recorded - PROMETHEUS_OWN)
    assert missing == [], f"queried but not exported: {missing}"
    # Each recording rule the dashboard reads is defined, and reads only exported families itself.
    assert {name for name in queried if ":" in name} <= recorded
