"""``/agent/`` (SPEC 8): start, watch and stop an agent on this control plane's own host.

Staff only, whatever ``FLEETWATCH_AUTH`` says: these views start and stop
processes on the host. The POSTs are CSRF-protected by Django's middleware
and answer with a redirect back to the page (post/redirect/get), the
outcome in a message. The rules live in ``proxy_app.ops.local_agent``.
"""

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from agent.launch import DEFAULT_LISTEN
from controlplane import clock
from controlplane.pages.access import dashboard_page
from controlplane.pages.layout import render_page
from proxy_app.ops.local_agent import AgentControlError, LocalAgent, agent_env, probe
from proxy_app.pool.summary import advertised_url

AGENT_TOKEN_NAME = "dashboard-local-agent"


def this_server_url(request):
    """Where a local agent reaches this Proxy: the address ``up`` advertises, else the one the browser used."""
    if settings.FLEETWATCH_ADVERTISE_PORT:
        return advertised_url()
    return f"{request.scheme}://{request.get_host()}"


# Whose an agent running on this host is, as the page says it.
OWNERS = {
    "page": "started from this page",
    "up": "manage.py up's own agent",
    "other": "not started here",
}


def running_agents(status):
    """Every agent the page knows to run on this host, its own first: ``[{owner, who, listen, health}]``.

    ``manage.py up`` tells its web server where its own agent listens
    (``FLEETWATCH_UP_AGENT_LISTEN``); any other agent answering on the
    default address is someone else's. The page stops only its own.
    """
    running = []
    if status.state == "running":
        running.append({"owner": "page", "listen": status.agent.listen, "health": status.health})
    for listen, owner in ((settings.FLEETWATCH_UP_AGENT_LISTEN, "up"), (DEFAULT_LISTEN, "other")):
        if not listen or any(agent["listen"] == listen for agent in running):
            continue
        health = probe(listen)
        if health is not None:
            running.append({"owner": owner, "listen": listen, "health": health})
    return [{**agent, "who": OWNERS[agent["owner"]]} for agent in running]


def _status_context(control):
    status = control.status()
    return {"status": status, "running": running_agents(status), "now": clock.now()}


@dashboard_page(staff_always=True)
def agent_page(request):
    control = LocalAgent.from_settings()
    context = _status_context(control)
    status = context["status"]
    return render_page(request, "agent/page.html", {
        "nav": "agent",
        **context,
        "listen": status.agent.listen if status.state == "running" else control.suggested_listen(),
        "proxy_url": this_server_url(request),
    })


@dashboard_page(staff_always=True)
def agent_status(request):
    """The status panel of ``/agent/``, polled."""
    return render_page(request, "agent/_status.html", _status_context(LocalAgent.from_settings()))


@dashboard_page(staff_always=True)
@require_POST
def agent_start(request):
    try:
        agent = LocalAgent.from_settings().start(request.POST.get("listen", ""), this_server_url(request),
                                                 agent_env(AGENT_TOKEN_NAME))
    except AgentControlError as error:
        messages.error(request, f"Not started. {error}")
    else:
        messages.success(request, f"Agent started: pid {agent.pid}, listening on {agent.listen}, "
                                  f"reporting to {agent.proxy_url}.")
    return redirect("local-agent")


@dashboard_page(staff_always=True)
@require_POST
def agent_stop(request):
    try:
        outcome = LocalAgent.from_settings().stop()
    except AgentControlError as error:
        messages.warning(request, str(error))
    else:
        how = "it ended after SIGTERM" if outcome == "stopped" else "it ignored SIGTERM and was killed"
        messages.success(request, f"Agent stopped: {how}.")
    return redirect("local-agent")
