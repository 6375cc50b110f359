"""/agent/ (SPEC 8): staff start, watch and stop a real agent on this host; CSRF-protected POSTs."""

import re
import socket

import psutil
import pytest
from django.test import Client

from proxy_app.ops.local_agent import AgentControlError, LocalAgent
from proxy_app.pages import agent as agent_pages
from tests.live import AgentProcess, free_port
from tests.pages.conftest import one, text_of

pytestmark = [pytest.mark.django_db, pytest.mark.live]


@pytest.fixture
def local(var_dir):
    """The control the views use (same VAR_DIR); whatever a test started is stopped afterwards."""
    control = LocalAgent(var_dir)
    yield control
    try:
        control.stop()
    except AgentControlError:
        pass


def messages_of(html):
    return [text_of(m) for m in re.findall(r'<p class="notice notice--\w+" role="status">(.*?)</p>', html, re.S)]


@pytest.fixture(autouse=True)
def no_other_agent(monkeypatch, settings):
    """Nobody else's agent where the page looks, unless a test puts one there (this host may run one on 9201)."""
    monkeypatch.setattr(agent_pages, "DEFAULT_LISTEN", f"127.0.0.1:{closed_port()}")
    settings.FLEETWATCH_UP_AGENT_LISTEN = ""


def closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running(html):
    """The page's first panel: (owner, text) of each agent it says runs on this host."""
    return [(owner, text_of(item)) for owner, item in
            re.findall(r'<li data-testid="agent-running" data-owner="(\w+)">(.*?)</li>', html, re.S)]


def test_it_shows_a_stopped_agent_and_a_start_form(page, local):
    html = page("/agent/")
    assert one(html, "agent-none") == "stopped No agent this page knows of runs on this host."
    assert one(html, "agent-state") == "stopped"
    assert re.search(r'name="csrfmiddlewaretoken" value="\w+"', html)
    assert re.search(r'name="listen" value="127\.0\.0\.1:\d+"', html)
    assert "reporting to http://testserver" in text_of(html)


def test_it_starts_and_stops_a_real_agent(staff, local):
    listen = f"127.0.0.1:{free_port()}"
    started = staff.post("/agent/start", {"listen": listen}, follow=True)
    html = started.content.decode()
    assert started.redirect_chain == [("/agent/", 302)]
    assert messages_of(html)[0].startswith("Agent started: pid ")
    assert f"listening on {listen}, reporting to http://testserver." in messages_of(html)[0]
    assert one(html, "agent-state") == "running"
    assert one(html, "agent-instance") == f"hp_{listen}"
    assert running(html) == [("page", f"running started from this page · on {listen} · as hp_{listen}")]
    assert local.status().state == "running"

    status = staff.get("/agent/status").content.decode()
    assert status.lstrip().startswith('<section id="agent-status"') and one(status, "agent-state") == "running"

    stopped = staff.post("/agent/stop", follow=True).content.decode()
    assert messages_of(stopped) == ["Agent stopped: it ended after SIGTERM."]
    assert one(stopped, "agent-state") == "stopped" and local.status().state == "stopped"


def test_it_says_why_an_agent_did_not_start(staff, local):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        listen = f"127.0.0.1:{holder.getsockname()[1]}"
        html = staff.post("/agent/start", {"listen": listen}, follow=True).content.decode()
    assert messages_of(html) == [f"Not started. {listen} is taken by another program. Choose another address."]
    assert one(html, "agent-state") == "stopped"
    bad = staff.post("/agent/start", {"listen": "no-port-here"}, follow=True).content.decode()
    assert messages_of(bad)[0].startswith("Not started. “no-port-here” is not an address")


def test_it_says_when_there_is_nothing_to_stop(staff, local):
    html = staff.post("/agent/stop", follow=True).content.decode()
    assert messages_of(html) == ["No agent started here is running: there is nothing to stop."]


def test_it_points_out_an_agent_it_did_not_start(page, local, tmp_path, monkeypatch):
    foreign = AgentProcess(tmp_path, "http://127.0.0.1:9", "foreign-1", args=["--no-report"]).start()
    try:
        monkeypatch.setattr(agent_pages, "DEFAULT_LISTEN", f"127.0.0.1:{foreign.port}")
        html = page("/agent/")
        assert running(html) == [("other", f"running not started here · on 127.0.0.1:{foreign.port} · as foreign-1 "
                                           "· this page leaves it alone")]
        assert one(html, "agent-state") == "stopped"  # nothing of its own
    finally:
        foreign.stop()


def test_it_says_up_runs_its_own_agent_first(page, local, tmp_path, settings):
    """What ``manage.py up`` runs shows as running, and as up's, not as a grey "stopped"."""
    ups = AgentProcess(tmp_path, "http://127.0.0.1:9", "up-agent", args=["--no-report"]).start()
    try:
        settings.FLEETWATCH_UP_AGENT_LISTEN = f"127.0.0.1:{ups.port}"  # what up tells its web server
        html = page("/agent/")
        assert running(html) == [("up", f"running manage.py up's own agent · on 127.0.0.1:{ups.port} · as up-agent "
                                        "· it stops with up; this page leaves it alone")]
        assert html.index('data-testid="agents-running"') < html.index('data-testid="agent-state"')
    finally:
        ups.stop()


def test_it_refuses_a_post_without_the_csrf_token(admin_user, local):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    response = browser.post("/agent/start", {"listen": f"127.0.0.1:{free_port()}"})
    assert response.status_code == 403
    assert not local.state_path.exists()
    assert browser.post("/agent/stop").status_code == 403


def test_it_answers_get_on_the_actions_with_405(staff):
    assert staff.get("/agent/start").status_code == 405
    assert staff.get("/agent/stop").status_code == 405


def test_it_hands_the_agent_an_instance_token_when_auth_is_on(staff, local, auth_on):
    from controlplane.api.tokens import ApiToken

    staff.post("/agent/start", {"listen": f"127.0.0.1:{free_port()}"})
    agent = local.status().agent
    token = psutil.Process(agent.pid).environ()["FLEETWATCH_AGENT_TOKEN"]
    assert ApiToken.objects.get(name="dashboard-local-agent", revoked_at=None).scope == "instance"
    assert token.startswith("fw_") and token not in " ".join(agent.argv)
    assert token not in local.state_path.read_text()


def test_it_hands_no_token_when_auth_is_off(staff, local, auth_off):
    staff.post("/agent/start", {"listen": f"127.0.0.1:{free_port()}"})
    assert "FLEETWATCH_AGENT_TOKEN" not in psutil.Process(local.status().agent.pid).environ()
