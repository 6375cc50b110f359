"""The assembled agent in-process, with fake NVML and counters, against the fake Proxy."""

import io
import json
import socket
import urllib.request

from agent.app import Agent, advertise_address, default_instance_id
from agent.config import Settings


def test_it_advertises_where_it_listens_by_default():
    assert advertise_address(Settings(listen_host="10.1.2.3"), 9201) == ("10.1.2.3", 9201)
    assert advertise_address(Settings(listen_host="0.0.0.0"), 9555) == (socket.gethostname(), 9555)
    assert advertise_address(Settings(advertise_host="gpu-7", advertise_port=8000), 9201) == ("gpu-7", 8000)
    assert default_instance_id("gpu-7", 8000) == "hp_gpu-7:8000"


def test_with_engines_it_advertises_where_the_first_engine_serves():
    engines = ("http://10.0.0.5:8000", "http://10.0.0.5:8001")
    assert advertise_address(Settings(engine_urls=engines), 9201) == ("10.0.0.5", 8000)
    assert advertise_address(Settings(engine_urls=("https://gpu-3",)), 9201) == ("gpu-3", 443)
    assert advertise_address(Settings(engine_urls=("http://0.0.0.0:8000",)), 9201) == (socket.gethostname(), 8000)
    # Each override wins for its own part.
    assert advertise_address(Settings(engine_urls=engines, advertise_host="gpu-7"), 9201) == ("gpu-7", 8000)
    assert advertise_address(Settings(engine_urls=engines, advertise_port=9000), 9201) == ("10.0.0.5", 9000)


def test_an_agent_with_an_engine_registers_the_engine_and_names_its_own_listener_as_agent_url(
        fake_proxy, two_gpus, source, busy_vllm):
    settings = Settings(listen_port=0, proxy_url=fake_proxy.url, sample_interval_ms=50, report_interval_ms=50,
                        engine_urls=(busy_vllm.url,))
    agent = Agent(settings, nvml=two_gpus, source=source)
    agent.start()
    try:
        assert fake_proxy.wait_for(lambda proxy: proxy.bodies("/v1/instance/register"), 10)
        [register] = fake_proxy.bodies("/v1/instance/register")
        engine_port = int(busy_vllm.url.rsplit(":", 1)[1])
        assert (register["host"], register["port"]) == ("127.0.0.1", engine_port)
        assert register["instance_id"] == f"hp_127.0.0.1:{engine_port}"
        assert register["meta"]["agent_url"] == f"http://127.0.0.1:{agent.server.port}"
    finally:
        agent.stop()


def test_it_registers_its_gpus_serves_and_unregisters(fake_proxy, two_gpus, source):
    settings = Settings(listen_port=0, proxy_url=fake_proxy.url, sample_interval_ms=50, report_interval_ms=50)
    agent = Agent(settings, nvml=two_gpus, source=source)
    agent.start()
    try:
        assert fake_proxy.wait_for(lambda proxy: len(proxy.bodies("/v1/instance/resource_snapshot")) >= 2, 10)
        [register] = fake_proxy.bodies("/v1/instance/register")
        port = agent.server.port
        assert register["instance_id"] == f"hp_127.0.0.1:{port}" and register["port"] == port
        assert register["meta"]["gpu_names"] == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]
        assert register["meta"]["gpu_status"] == "ok"
        assert register["meta"]["agent_url"] == f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/resource/snapshot", timeout=5) as response:
            served = json.loads(response.read())
        assert [gpu["uuid"] for gpu in served["devices"]["gpu"]] == ["GPU-aaaa", "GPU-bbbb"]
    finally:
        agent.stop()
    assert fake_proxy.bodies("/v1/instance/unregister") == [{"instance_id": f"hp_127.0.0.1:{port}"}]
    assert two_gpus.initialised == 0


def test_it_sends_no_proxy_traffic_with_no_report(fake_proxy, two_gpus, source):
    agent = Agent(Settings(listen_port=0, proxy_url=fake_proxy.url, report=False), nvml=two_gpus, source=source)
    agent.start()
    agent.stop()
    assert agent.reporter is None and fake_proxy.requests == []


def test_it_prints_rates_from_two_samples_with_once(two_gpus, source):
    out = io.StringIO()
    status = Agent(Settings(report=False, sample_interval_ms=10, instance_id="x"), nvml=two_gpus,
                   source=source).once(out)
    snapshot = json.loads(out.getvalue())
    assert status == 0
    assert snapshot["devices"]["network"][0]["rx_mbps"] == 0.0  # second sample: measured, not null
    assert snapshot["devices"]["gpu"][1]["utilization_sample_count"] == 2
