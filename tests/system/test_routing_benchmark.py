"""The routing benchmark against a Proxy served by ``up``: every policy routes the workload for a few
seconds, and the JSON has a row of every field for each (the figures themselves are bench/README.md's); the
prompts sent as chats, the Proxy tokenizing them, place requests where the engines hit their keys."""

import json
import subprocess
import sys

import pytest

from simulator.cli import DEFAULT_TOKENIZER
from simulator.routing import MIXED_POLICIES, POLICIES
from simulator.workload import MODEL
from tests.live import ROOT, free_port

pytestmark = pytest.mark.live

FIELDS = {"requests", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "shed", "route_busy", "failed",
          "sent_to_failed_host_after_2s"}


def test_it_routes_the_workload_by_every_policy_and_writes_the_table(servers, tmp_path):
    # The router asks on the route listener (the web port + 1 by default, as `up` puts it): on the web port a
    # full route lane's 429 route_busy was counted as a shed verdict (issue 47).
    server = servers(roles="proxy")
    server.extra_env["FLEETWATCH_ROUTE_PORT"] = str(server.port + 1)
    server.route_url = f"http://127.0.0.1:{server.port + 1}"
    server.start()
    path = tmp_path / "routing.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "simulate_fleet", "--routing-benchmark", "--proxy-url", server.url,
         "--routing-duration", "4", "--routing-hosts", "8", "--no-progress", "--json", str(path)],
        cwd=ROOT, env=server.env(), capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(path.read_text())
    routing = result["routing"]
    assert result["route_url"] == server.route_url
    assert "route busy" in run.stdout

    assert list(routing) == list(MIXED_POLICIES)
    for policy, row in routing.items():
        assert FIELDS <= set(row), policy
        assert row["requests"] > 0 and row["served"] > 0, (policy, row)
        assert row["failed_by_kind"]["route_error"] == 0, (policy, row)
    assert "routing benchmark" in run.stdout
    assert server.get("/v1/instance/list") == []  # every policy's fleet unregistered


def test_it_routes_the_shared_prefix_workload_by_the_six_policies_with_the_engines_publishing(servers, tmp_path):
    server = servers(roles="proxy", env={"FLEETWATCH_ROUTE_PORT": str(free_port())}).start()
    path = tmp_path / "routing.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "simulate_fleet", "--routing-benchmark", "--workload",
         "shared-prefix", "--proxy-url", server.url, "--route-url", server.route_url,
         "--routing-duration", "4", "--routing-hosts", "8",
         "--no-progress", "--json", str(path)],
        cwd=ROOT, env=server.env(), capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(path.read_text())
    routing = result["routing"]

    assert list(routing) == list(POLICIES)
    for policy, row in routing.items():
        assert FIELDS | {"prefix_hit_ratio", "output_tokens_per_s"} <= set(row), policy
        assert row["served"] > 0 and row["failed_by_kind"]["route_error"] == 0, (policy, row)
        assert ("prefix_feed" in row) == (policy != "placement-learned"), policy
    assert set(result["targets"]) == {"placement_p90_le_0.5_placement_load", "placement_p90_le_0.25_round_robin"}
    assert server.get("/v1/instance/list") == []


def test_it_sends_the_prompts_as_chats_the_proxy_tokenizes_and_the_engines_hit_their_keys(servers, tmp_path):
    # The Proxy tokenizes with the tokenizer the simulator writes its prompts with (its default, the tests' tiny one).
    tokenizers = json.dumps({MODEL: str(DEFAULT_TOKENIZER)})
    server = servers(roles="proxy", env={"FLEETWATCH_TOKENIZERS": tokenizers,
                                         "FLEETWATCH_ROUTE_PORT": str(free_port())}).start()
    path = tmp_path / "routing.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "simulate_fleet", "--routing-benchmark", "--workload",
         "shared-prefix", "--prompt-form", "chat", "--route", "placement", "--proxy-url", server.url,
         "--route-url", server.route_url,
         "--routing-duration", "6", "--routing-hosts", "8", "--no-progress", "--json", str(path)],
        cwd=ROOT, env=server.env(), capture_output=True, text=True, timeout=180,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(path.read_text())
    row = result["routing"]["placement"]

    assert (result["workload"]["prompt_form"], result["workload"]["tokenizer"]) == ("chat", str(DEFAULT_TOKENIZER))
    assert row["served"] > 0 and row["failed_by_kind"]["route_error"] == 0, row
    assert row["prompt_error"] == {}, row  # every chat keyed by the Proxy's tokenizer
    assert set(row["prefix_source"]) == {"events"}, row  # every answer read the engines' published caches
    assert row["prefix_hit_ratio"] > 0, row  # the engines hit the keys of the ids the Proxy placed them by
    assert "prompts sent as chat" in run.stdout
