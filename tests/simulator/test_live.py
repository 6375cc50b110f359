"""``manage.py simulate_fleet`` against a real Proxy over HTTP (pytest-django's live server).

The live server serves this test database on a real socket. On SQLite the
test database is in memory and its one connection is shared by the server's
request threads, so these runs use one HTTP connection: requests reach the
server one at a time. Runs are bounded by report slots (``--rounds``); the
assertions are counts that hold however the slots fell on a loaded machine.
"""

import io
import json
import socket

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.api.tokens import ApiToken, Scope

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT_S = 60


@pytest.fixture
def proxy_url(settings, live_server):
    # These runs test the simulator, not the Proxy's guards.
    settings.FLEETWATCH_AUTH = False
    settings.FLEETWATCH_RATE_LIMIT = 0
    return live_server.url


@pytest.fixture
def simulate(proxy_url, tmp_path):
    """Run the command to its end; returns (its JSON summary, what it printed)."""

    def _simulate(*args):
        path = tmp_path / "summary.json"
        out = io.StringIO()
        call_command("simulate_fleet", "--proxy-url", proxy_url, "--no-progress", "--json", str(path),
                     "--connections", "1", "--timeout-s", str(TIMEOUT_S), *args, stdout=out)
        return json.loads(path.read_text()), out.getvalue()

    return _simulate


def listed(url, prefix="sim-", token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = requests.get(url + "/v1/instance/list", params={"include_dead": "true"}, headers=headers,
                            timeout=TIMEOUT_S)
    assert response.status_code == 200, response.text
    return {row["instance_id"]: row for row in response.json() if row["instance_id"].startswith(prefix)}


def slots(summary):
    events = summary["events"]
    return sum(events.get(name, 0) for name in ("report_slots", "skipped_slots", "backoff_slots", "shed_slots"))


def test_its_acknowledged_reports_reach_the_proxy(simulate, proxy_url):
    summary, printed = simulate("--instances", "5", "--interval-ms", "300", "--rounds", "4", "--calm",
                                "--no-unregister")
    rows = listed(proxy_url)

    assert summary["errors"] == 0 and summary["errors_by_kind"] == {}
    assert summary["sent"] == summary["acknowledged"]
    assert summary["requests"]["register"]["acknowledged"] == 5
    assert slots(summary) == 5 * 4
    assert sorted(rows) == [f"sim-0000{i}" for i in range(5)]
    # Every acknowledged report was stored: the sequence numbers add up to them.
    assert all(row["is_alive"] and row["resource"]["report_seq"] >= 1 for row in rows.values())
    assert sum(row["resource"]["report_seq"] for row in rows.values()) == summary["requests"]["snapshot"][
        "acknowledged"]
    assert summary["events"].get("stale_answers", 0) == 0
    assert "simulate_fleet summary" in printed and "errors: none" in printed
    assert summary["unregistered_at_end"] is False
    assert "left registered (--no-unregister): the 5 instances stay listed" in printed


def test_the_proxy_reads_its_snapshots_as_the_agents(simulate, proxy_url):
    simulate("--instances", "4", "--interval-ms", "300", "--rounds", "2", "--calm", "--no-unregister",
             "--gpus", "8", "--capabilities", "0.99")
    for row in listed(proxy_url).values():
        resource = row["resource"]
        gpus = resource["raw_resource"]["devices"]["gpu"]
        assert len(gpus) == 8
        assert resource["gpu_count"] == sum(gpu["utilization_sample_ok"] for gpu in gpus)
        assert resource["gpu_mem_total_mb"] == pytest.approx(sum(gpu["memory_total_mb"] or 0 for gpu in gpus))
        assert resource["admission_state"] == resource["raw_resource"]["capacity_hint"]["admission_state"]
        assert row["tags"] == ["h100x8", "simulated"]
        assert row["capability_fingerprint"].startswith("sha256:")
        parallelism = row["capabilities"]["parallelism"]
        assert parallelism["tensor_parallel_size"] * (parallelism.get("data_parallel_size") or 1) == 8


def test_its_engines_reach_the_proxy_and_can_be_turned_off(simulate, proxy_url):
    summary, _ = simulate("--instances", "3", "--interval-ms", "300", "--rounds", "2", "--calm", "--no-unregister",
                          "--gpus", "2", "--engine-faults", "0")
    rows = listed(proxy_url)
    assert summary["errors"] == 0 and len(rows) == 3
    for row in rows.values():
        resource = row["resource"]
        [engine] = resource["raw_resource"]["engines"]
        assert (engine["kind"], engine["status"], engine["model"]) == ("vllm", "ok", "meta-llama/Llama-3.1-8B-Instruct")
        # The Proxy's SPEC 13 columns are the engine's figures.
        assert (resource["engine_count"], resource["engine_status"]) == (1, "ok")
        assert resource["engine_models"] == ["meta-llama/Llama-3.1-8B-Instruct"]
        assert resource["requests_waiting"] == engine["requests_waiting"] >= 0
        assert resource["requests_running"] == engine["requests_running"]
        assert resource["kv_cache_usage_ratio"] == engine["kv_cache_usage_ratio"]

    simulate("--instances", "3", "--interval-ms", "300", "--rounds", "2", "--calm", "--no-unregister",
             "--gpus", "2", "--id-prefix", "plain", "--no-engines")
    plain = listed(proxy_url, prefix="plain-")
    assert len(plain) == 3 and all("engines" not in row["resource"]["raw_resource"] for row in plain.values())


def test_it_unregisters_its_instances_at_the_end(simulate, proxy_url):
    summary, printed = simulate("--instances", "3", "--interval-ms", "300", "--rounds", "2", "--calm",
                          "--id-prefix", "gone")

    unregistered = summary["requests"]["unregister"]
    assert (unregistered["sent"], unregistered["acknowledged"], unregistered["errors"]) == (3, 3, 0)
    assert listed(proxy_url, prefix="gone-") == {}
    assert summary["unregistered_at_end"] is True and "left registered" not in printed


def test_the_proxy_takes_a_restarted_hosts_reports_as_new(simulate, proxy_url):
    # Half the slots restart (seed 0: sim-00001 at its first two slots), so the
    # lower report_seq after a restart arrives after a higher one.
    summary, _ = simulate("--instances", "4", "--interval-ms", "500", "--rounds", "6", "--stale-per-hour", "0",
                          "--restarts-per-hour", str(0.5 * 3_600_000 / 500), "--no-unregister")
    rows = listed(proxy_url)

    assert summary["events"]["restarts"] >= 2
    assert summary["requests"]["register"]["acknowledged"] == 4 + summary["events"]["restarts"]
    # A restart's report_seq starts over with a newer wall time: never taken as a late report.
    assert summary["events"].get("stale_answers", 0) == 0
    assert summary["errors"] == 0
    assert sum(row["resource"]["report_seq"] for row in rows.values()) < summary["requests"]["snapshot"][
        "acknowledged"]


def test_it_reports_with_a_bearer_token_when_auth_is_on(simulate, proxy_url, settings):
    settings.FLEETWATCH_AUTH = True
    _, secret = ApiToken.objects.issue("simulator", Scope.INSTANCE)
    summary, _ = simulate("--instances", "3", "--interval-ms", "300", "--rounds", "2", "--calm", "--no-unregister",
                          "--token", secret)

    assert summary["errors"] == 0 and summary["requests"]["register"]["acknowledged"] == 3
    assert sorted(listed(proxy_url, token=secret)) == ["sim-00000", "sim-00001", "sim-00002"]


def refused_without_a_token(simulate, settings, tmp_path, *args):
    """Run with auth on and no token: the command's error, which says what to pass, and its summary."""
    settings.FLEETWATCH_AUTH = True
    with pytest.raises(CommandError, match="http_401") as refused:
        simulate(*args)
    # The error says what to pass, not only what failed.
    assert "pass --token with one of scope instance" in str(refused.value)
    assert "create_token --scope instance" in str(refused.value)
    return str(refused.value), json.loads((tmp_path / "summary.json").read_text())


def test_without_a_token_it_counts_the_proxys_refusals(simulate, settings, tmp_path):
    _, summary = refused_without_a_token(simulate, settings, tmp_path,
                                         "--instances", "2", "--interval-ms", "100", "--rounds", "2", "--calm")

    assert summary["acknowledged"] == 0
    assert summary["errors_by_kind"] == {"http_401": summary["sent"]}


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_it_fails_with_the_errors_by_kind_when_the_proxy_is_unreachable(tmp_path):
    path = tmp_path / "summary.json"
    url = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(CommandError, match="connection_error") as failed:
        call_command("simulate_fleet", "--proxy-url", url, "--instances", "2",
                     "--interval-ms", "50", "--rounds", "2", "--no-progress", "--json", str(path), stdout=io.StringIO())
    # It names the address it could not reach (a wrong port is the usual cause).
    assert f"nothing answers at {url}: is the Proxy running there?" in str(failed.value)
    summary = json.loads(path.read_text())
    assert summary["acknowledged"] == 0
    assert set(summary["errors_by_kind"]) == {"connection_error"}


def test_without_a_token_and_without_an_end_it_stops_after_the_first_refusals(simulate, settings, tmp_path):
    # No --rounds: it would retry for the whole --duration (forever without one), refused every time.
    message, summary = refused_without_a_token(simulate, settings, tmp_path,
                                               "--instances", "1", "--interval-ms", "100", "--duration", "600",
                                               "--calm")

    assert "(stopped: its first 3 requests were all refused)" in message
    assert summary["events"]["gave_up_refused"] == 1
    assert summary["errors_by_kind"] == {"http_401": 3}
    assert summary["elapsed_s"] < 60


def test_a_relative_json_path_is_the_callers_of_fw(tmp_path, monkeypatch):
    # Nothing listens there: the run fails at once, and still writes its summary.
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.setenv("FLEETWATCH_CALLER_DIR", str(caller))
    with pytest.raises(CommandError):
        call_command("simulate_fleet", "--proxy-url", f"http://127.0.0.1:{closed_port()}", "--instances", "1",
                     "--interval-ms", "50", "--rounds", "1", "--no-progress", "--json", "rounds.json",
                     stdout=io.StringIO())
    assert json.loads((caller / "rounds.json").read_text())["instances"] == 1


def test_a_token_of_the_wrong_scope_gets_a_hint_about_the_scope(simulate, settings):
    settings.FLEETWATCH_AUTH = True
    _, secret = ApiToken.objects.issue("dashboards", Scope.READ)
    with pytest.raises(CommandError, match="http_403") as refused:
        simulate("--instances", "1", "--interval-ms", "100", "--rounds", "1", "--calm", "--token", secret)
    assert "it needs scope instance" in str(refused.value)
    assert "pass --token" not in str(refused.value)


def test_it_refuses_more_processes_than_instances():
    with pytest.raises(CommandError, match="--processes"):
        call_command("simulate_fleet", "--instances", "2", "--processes", "3", stdout=io.StringIO())
