"""The browser tests' world: a real ``manage.py up``, simulated hosts and proxies, a real headless Chromium.

``fleet`` (one per module) runs the whole system on its own port and fresh
database, with its own local agent, and a ``SimulatedHosts`` thread that
reports for a few synthetic hosts (an 8-GPU host with an unhealthy GPU, a
GPU-less host) and heartbeats for two other proxies, the way agents and
proxies do: request bodies from ``tests/factories.py`` over HTTP. One host
and one proxy report once and then fall silent, so they go stale within the
short TTLs set here. Chromium is Debian's (``/usr/bin/chromium``); nothing
is downloaded. Every page's console errors fail the test that opened it.
"""

import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pytest
import requests

from tests.factories import make_engine, make_gpu, make_pool_resource, make_snapshot
from tests.live import ROOT, LiveServer, wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# Under var/ (not tracked), so a test run leaves the clone as it was; `./fw screenshots`
# sets FLEETWATCH_SCREENSHOTS_DIR to docs/screenshots/ to refresh the README's pictures.
SCREENSHOTS = Path(os.environ.get("FLEETWATCH_SCREENSHOTS_DIR") or ROOT / "var" / "screenshots")
STAFF = ("staff", "staff-password-for-tests")
# Auth on (the default): the pages need a staff login; the simulated hosts
# write as old token-less clients on the trusted loopback (tests/live.py).
# Short TTLs, so a host or proxy that falls silent is stale within seconds.
LIVE_ENV = {"FLEETWATCH_AUTH": "on", "FLEETWATCH_INSTANCE_TTL_S": "9", "FLEETWATCH_PROXY_TTL_S": "9",
            "FLEETWATCH_PROXY_HEARTBEAT_S": "2"}
DEADLINE_S = 90


def eight_gpus(load):
    """An 8-GPU host: GPU 5 has uncorrected ECC errors (health error), GPU 3 runs hot (degraded)."""
    gpus = [make_gpu(i, avg=min(100.0, load + 4 * i), used=52000.0 + 1500 * i, total=81559.0,
                     name="NVIDIA H100 80GB HBM3", temperature_c=58 + i, power_w=380.0 + 20 * i, power_limit_w=700.0,
                     sm_clock_mhz=1980, mem_clock_mhz=2619, ecc_uncorrected_volatile=0, throttle_reasons=[],
                     health_reasons=[]) for i in range(8)]
    gpus[3].update(health="degraded", temperature_c=87, throttle_reasons=["sw_thermal_slowdown"],
                   health_reasons=["temperature_c=87>=85", "throttle:sw_thermal_slowdown"])
    gpus[5].update(health="error", ecc_uncorrected_volatile=2, health_reasons=["ecc_uncorrected_volatile=2"])
    return gpus


@dataclass
class Host:
    instance_id: str
    host: str
    gpus: bool
    cpu: float | None = None  # a fixed CPU figure a test sets; None: a moving one
    silent: bool = False


class SimulatedHosts(threading.Thread):
    """Reports for synthetic hosts and heartbeats for synthetic proxies every half second, until stopped."""

    def __init__(self, url):
        super().__init__(name="simulated-hosts", daemon=True)
        self.url = url
        self.session = requests.Session()
        self.stopping = threading.Event()
        self.hosts = [Host("gpu-node-01", "10.0.4.11", gpus=True), Host("cpu-node-02", "10.0.4.12", gpus=False),
                      Host("old-node-03", "10.0.4.13", gpus=True, silent=True)]
        self.proxies = {"pool-b": make_pool_resource(alive=12, total=12, cpu=61.0, gpu=83.0, admission="degraded"),
                        "pool-c": make_pool_resource(alive=7, total=8, cpu=22.0, gpu=35.0, memory_used_ratio=0.4)}
        self.proxies["pool-b"]["utilization"].update(network_rx_mbps_total=148000.0, network_tx_mbps_total=61000.0)
        self.proxies["pool-b"]["engine"] = {"instances_with_engine": 12, "requests_waiting_total": 41,
                                            "requests_running_total": 380, "kv_cache_usage_max": 0.93,
                                            "saturation": 0.82}
        self.proxies["pool-c"]["engine"] = {"instances_with_engine": 7, "requests_waiting_total": 2,
                                            "requests_running_total": 61, "kv_cache_usage_max": 0.4,
                                            "saturation": 0.28}
        self.seq = 0
        self.errors = []

    def host(self, instance_id):
        return next(h for h in self.hosts if h.instance_id == instance_id)

    def post(self, path, body):
        response = self.session.post(self.url + path, json=body, timeout=10)
        response.raise_for_status()
        return response.json()

    def register_all(self):
        for port, host in enumerate(self.hosts, start=8001):
            self.post("/v1/instance/register", {"instance_id": host.instance_id, "host": host.host, "port": port,
                                                "meta": {"hostname": host.instance_id}})
            self.report(host)
        for port, (proxy_id, summary) in enumerate({**self.proxies, "pool-gone": make_pool_resource()}.items(), 8102):
            self.post("/v1/proxy/register", {"proxy_id": proxy_id, "host": "10.0.9.1", "port": port,
                                             "pool_resource": summary})

    def report(self, host):
        self.seq += 1
        wave = 45 + 35 * math.sin(self.seq / 9)
        cpu = host.cpu if host.cpu is not None else round(wave, 1)
        snapshot = make_snapshot(
            cpu=cpu, used_mb=640000.0 + 1000 * (self.seq % 40), total_mb=1031000.0, free_mb=390000.0,
            gpus=eight_gpus(round(wave, 1)) if host.gpus else [], hostname=host.instance_id,
            admission="rejecting" if host.gpus else "accepting",
            network=[{"iface": "eth0", "rx_mbps": round(800 + 300 * math.sin(self.seq / 5), 1), "tx_mbps": 455.1,
                      "speed_mbps": 100000}, {"iface": "ib0", "rx_mbps": 12400.0, "tx_mbps": 9800.0,
                                              "speed_mbps": 400000}],
            gpu_status="ok" if host.gpus else "no_gpu", timestamp_ms=int(time.time() * 1000))
        if host.gpus:  # a data-parallel vLLM on the GPU hosts, its queue rising and falling with the load
            snapshot["engines"] = [make_engine(
                url="http://127.0.0.1:8000", model="llama-3.1-70b", engine_index=str(index),
                scraped_at_ms=snapshot["timestamp_ms"] - 150, requests_running=24 - 4 * index,
                requests_waiting=max(0, int(wave / 5) - 6 * index), kv_cache_usage_ratio=round(wave / 110 - 0.1 * index, 4),
                kv_cache_capacity_tokens=1_048_576, ttft_p50_s=0.21, ttft_p95_s=round(0.4 + wave / 60, 2),
                lora={"max": 4, "running": ["sql-adapter"], "waiting": []}) for index in range(2)]
        snapshot["devices"]["cpu"].update(per_core_pct=[round((wave + 7 * i) % 100, 1) for i in range(32)],
                                          count_logical=32, count_physical=16)
        snapshot["devices"]["memory"].update(swap_used_mb=0.0, swap_total_mb=8192.0)
        snapshot["devices"]["disk"] = [{"mount": "/", "used_gb": 120.5, "total_gb": 1800.0},
                                       {"mount": "/models", "used_gb": 2950.0, "total_gb": 3500.0}]
        self.post("/v1/instance/resource_snapshot", {
            "instance_id": host.instance_id, "snapshot": snapshot,
            "metadata": {"reported_instance_id": host.instance_id, "report_seq": self.seq}})

    def run(self):
        while not self.stopping.wait(0.5):
            try:
                for host in self.hosts:
                    if not host.silent:
                        self.report(host)
                for proxy_id, summary in self.proxies.items():
                    self.post("/v1/proxy/heartbeat", {"proxy_id": proxy_id, "pool_resource": summary})
            except requests.RequestException as error:  # the server going down at the end
                self.errors.append(error)

    def stop(self):
        self.stopping.set()
        self.join(10)


@dataclass
class Fleet:
    server: LiveServer
    hosts: SimulatedHosts

    @property
    def url(self):
        return self.server.url

    @property
    def proxy_id(self):
        return f"hp_127.0.0.1:{self.server.port}"


def create_staff_user(server):
    env = {**server.env(), "DJANGO_SUPERUSER_PASSWORD": STAFF[1]}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "createsuperuser", "--noinput", "--username", STAFF[0],
                    "--email", "staff@example.invalid"], cwd=ROOT, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (Debian: apt-get install chromium)")
    server = LiveServer(tmp_path_factory.mktemp("browser"), agent=True, env=LIVE_ENV)
    server.start()
    hosts = SimulatedHosts(server.url)
    try:
        create_staff_user(server)
        hosts.register_all()
        hosts.start()
        # The local agent, and the link registering this proxy at its own scheduler.
        wait_for(lambda: any(row["instance_id"].startswith("hp_127.0.0.1:") for row in server.get("/v1/instance/list")),
                 timeout_s=DEADLINE_S, message="the local agent to report")
        wait_for(lambda: any(row["proxy_id"] == f"hp_127.0.0.1:{server.port}" for row in server.get("/v1/proxy/list")),
                 timeout_s=DEADLINE_S, message="the link to register")
        yield Fleet(server, hosts)
    finally:
        hosts.stop()
        server.stop()
        server.database.drop()


@pytest.fixture(scope="module")
def chromium():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module", autouse=True)
def patient_expectations():
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)


class Browser:
    """One browser context (a theme, a viewport ``width`` px wide) and its page; console errors are collected."""

    def __init__(self, chromium, base_url, theme="light", width=1440):
        self.context = chromium.new_context(viewport={"width": width, "height": 900}, color_scheme=theme,
                                            base_url=base_url)
        self.page = self.context.new_page()
        self.errors = []
        self.expected_missing = set()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _console(self, message):
        url = message.location.get("url", "")
        if message.type == "error" and urlparse(url).path not in self.expected_missing:
            self.errors.append(f"{message.text} ({url})")

    def log_in(self, next_path="/fleet/"):
        """Log in as staff through the admin login page a page sends an anonymous user to."""
        page = self.page
        page.goto(next_path)
        page.wait_for_url("**/admin/login/**")
        page.fill("#id_username", STAFF[0])
        page.fill("#id_password", STAFF[1])
        page.click("input[type=submit]")
        page.wait_for_url(f"**{next_path}")

    def screenshot(self, name, theme):
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}-{theme}.png"), full_page=True)

    def close(self):
        self.context.close()


@pytest.fixture
def browser(fleet, chromium):
    """A logged-in staff user's browser; fails the test if any page logged a JavaScript error."""
    opened = Browser(chromium, fleet.url)
    opened.log_in()
    yield opened
    errors = list(opened.errors)
    opened.close()
    assert errors == [], f"JavaScript errors: {errors}"


@pytest.fixture
def open_browser(fleet, chromium):
    """Factory of further browsers (another theme or width, nobody logged in), closed afterwards."""
    made = []

    def _open(theme="light", logged_in=True, width=1440):
        opened = Browser(chromium, fleet.url, theme, width)
        if logged_in:
            opened.log_in()
        made.append(opened)
        return opened

    yield _open
    errors = [error for opened in made for error in opened.errors]
    for opened in made:
        opened.close()
    assert errors == [], f"JavaScript errors: {errors}"

