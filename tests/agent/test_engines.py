"""Engines scraped over real HTTP in the background: answers, failures, hangs, no pile-up (SPEC 13)."""

import json
import socket
import threading
import time
import urllib.request

import pytest

from agent.app import Agent
from agent.config import Settings
from agent.engines.http import MetricsFetcher
from agent.engines.scraper import EngineScraper, EngineScrapers
from agent.gpu.monitor import GpuMonitor
from agent.sampler import HostSampler
from agent.snapshot import SamplingLoop, SnapshotBuilder, SnapshotStore
from tests.agent.conftest import ENGINE_CAPTURES
from tests.agent.fake_pynvml import FakeNvml
from tests.live import free_port

IDLE = (ENGINE_CAPTURES / "vllm-0.32.0-cpu-idle.prom").read_text()
FIGURES = ["requests_running", "requests_waiting", "kv_cache_usage_ratio", "kv_cache_capacity_tokens",
           "prefix_cache_hit_ratio", "preemptions", "prompt_tokens_per_s", "generation_tokens_per_s",
           "ttft_p50_s", "ttft_p95_s", "itl_p50_s", "lora", "sleeping"]
WAIT_S = 10  # generous: the machine may be loaded; nothing here asserts a wall time


def scrapers(urls, clock, timeout_ms=500):
    engines = EngineScrapers(urls, timeout_ms=timeout_ms, window_ms=10_000, clock_ms=clock.ms,
                             clock_wall_ms=lambda: 1_796_119_700_000 + clock.ms())
    engines.start()
    return engines


def settle(engines):
    """Let the scrapes asked for finish, as a sampling interval would (never longer than their timeout)."""
    for scraper in engines.scrapers:
        assert scraper.wait_idle(WAIT_S)


def builder(source, clock, engines):
    gpus = GpuMonitor(FakeNvml([]), clock_ms=clock.ms)
    gpus.open()
    return SnapshotBuilder(HostSampler(source, clock.ms), gpus, "engine-host:8000", "engine-host", engines=engines)


def test_it_scrapes_a_real_capture_and_derives_its_windowed_figures(busy_vllm, clock):
    engines = scrapers([busy_vllm.url], clock)
    try:
        engines.prime()
        [engine] = engines.objects()
        assert (engine["url"], engine["kind"], engine["status"], engine["error"]) == (busy_vllm.url, "vllm", "ok",
                                                                                      None)
        assert (engine["requests_running"], engine["requests_waiting"]) == (4, 8)
        assert isinstance(engine["scrape_ms"], float) and engine["scrape_ms"] >= 0
        assert engine["scraped_at_ms"] == 1_796_119_700_000 + clock.ms()
        busy_vllm.body = IDLE
        clock.advance(10_000)
        engines.request()
        settle(engines)
        [engine] = engines.objects()
        assert engine["generation_tokens_per_s"] == 1243.5 and engine["requests_waiting"] == 0
        assert busy_vllm.connections == 1  # one kept-alive connection, not one per scrape
    finally:
        engines.stop()


def test_it_omits_the_engines_key_without_engine_urls(source, clock):
    assert "engines" not in builder(source, clock, None).take()


@pytest.mark.parametrize(("mode", "status", "error"), [
    ("error", "http_error", "HTTP 500 Internal Server Error"),
    ("garbage", "bad_format", "no vllm: or sglang: metrics in the answer"),
    ("hang", "timeout", "no answer within 200 ms"),
])
def test_it_reports_a_failing_engine_and_nulls_within_two_ticks(busy_vllm, source, clock, mode, status, error):
    engines = scrapers([busy_vllm.url], clock, timeout_ms=200)
    try:
        engines.prime()
        take = builder(source, clock, engines).take
        assert take()["engines"][0]["status"] == "ok"
        busy_vllm.mode = mode
        settle(engines)  # the scrape tick 1 asked for ends, by its answer or its timeout
        take()  # tick 1: asks the failing engine
        settle(engines)
        clock.advance(1000)
        [engine] = take()["engines"]  # tick 2
        assert (engine["status"], engine["error"]) == (status, error)
        assert (engine["kind"] is None) == (status == "bad_format")
        assert (engine["model"], engine["engine_index"]) == ("tiny", "0")  # the engine it was, known
        assert [engine[name] for name in FIGURES] == [None] * len(FIGURES)
    finally:
        engines.stop()


def test_it_reports_a_closed_port_unreachable_and_rejects_work_when_no_engine_is_ok(source, clock):
    engines = scrapers([f"http://127.0.0.1:{free_port()}"], clock)
    try:
        engines.prime()
        snapshot = builder(source, clock, engines).take()
    finally:
        engines.stop()
    [engine] = snapshot["engines"]
    assert (engine["status"], engine["kind"], engine["model"]) == ("unreachable", None, None)
    assert "ConnectionRefusedError" in engine["error"]
    assert snapshot["capacity_hint"]["admission_state"] == "rejecting"
    assert snapshot["capacity_hint"]["admission_reasons"] == ["engine_unreachable"]


def test_it_degrades_admission_on_a_long_queue(busy_vllm, source, clock):
    engines = scrapers([busy_vllm.url], clock)
    try:
        engines.prime()
        strict = builder(source, clock, engines)
        strict.thresholds = Settings(max_engine_requests_waiting=8).thresholds
        hint = strict.take()["capacity_hint"]
    finally:
        engines.stop()
    assert hint["admission_state"] == "degraded"
    assert hint["admission_reasons"] == ["engine0:requests_waiting=8>=8"]


class BlockedFetcher:
    """A fetch stuck below any socket timeout (a DNS lookup that never returns), counted."""

    def __init__(self):
        self.calls = 0
        self.release = threading.Event()

    def fetch(self):
        self.calls += 1
        self.release.wait(WAIT_S)
        return "unreachable", "released", None

    def close(self):
        pass


def test_it_reports_a_stuck_scrape_as_timeout_and_never_starts_a_second(clock):
    fetcher = BlockedFetcher()
    scraper = EngineScraper("http://engine.invalid:8000", timeout_ms=500, clock_ms=clock.ms, fetcher=fetcher)
    scraper.start()
    try:
        threads = threading.active_count()
        assert scraper.request() is True
        for _ in range(5):  # five more ticks, one second apart, while the thread is stuck
            clock.advance(1000)
            assert scraper.request() is False
            [engine] = scraper.objects()
            assert (engine["status"], engine["error"]) == ("timeout", "no answer within 500 ms")
            assert engine["scrape_ms"] is None and engine["requests_waiting"] is None
        assert threading.active_count() == threads
    finally:
        fetcher.release.set()
        assert scraper.wait_idle(WAIT_S)
        scraper.stop()
    assert fetcher.calls == 1


class GatedFetcher:
    """Answers the idle capture at once, or, while ``stuck``, not before it is released."""

    def __init__(self):
        self.stuck = False
        self.release = threading.Event()

    def fetch(self):
        if self.stuck:
            self.release.wait(WAIT_S)
        return "ok", None, IDLE

    def close(self):
        pass


def test_engine_ticks_never_wait_for_a_scrape_each_puts_its_own_and_a_stuck_one_turns_timeout(source, clock):
    fetcher = GatedFetcher()
    engines = EngineScrapers([], timeout_ms=500, clock_ms=clock.ms)
    engines.scrapers = [EngineScraper("http://engine:8000", timeout_ms=500, clock_ms=clock.ms, fetcher=fetcher)]
    engines.subscribers = [None]
    store = SnapshotStore()
    loop = SamplingLoop(builder(source, clock, engines), store, 1000, clock.ms, engine_interval_ms=250)
    engines.start()

    def status():
        return store.latest()["engines"][0]["status"]

    try:
        loop.sample_once()  # the host sample that engine refreshes build on
        assert status() == "timeout"  # no answer yet
        loop.refresh_engines()
        deadline = time.monotonic() + WAIT_S
        while status() != "ok" and time.monotonic() < deadline:  # put by the engine's thread when it answered
            time.sleep(0.01)
        assert status() == "ok"
        fetcher.stuck = True
        loop.refresh_engines()  # returns at once although the scrape hangs
        clock.advance(250)
        loop.refresh_engines()  # still busy: put from the tick, within the timeout
        assert status() == "ok"
        clock.advance(300)
        loop.refresh_engines()
        assert (status(), store.latest()["engines"][0]["error"]) == ("timeout", "no answer within 500 ms")
    finally:
        fetcher.release.set()
        engines.stop()


def test_it_gives_up_on_a_hung_engine_at_its_timeout_and_reconnects(busy_vllm):
    fetcher = MetricsFetcher(busy_vllm.url, timeout_s=0.2)
    assert fetcher.fetch()[0] == "ok"
    busy_vllm.mode = "hang"
    assert fetcher.fetch() == ("timeout", "no answer within 200 ms", None)
    busy_vllm.mode = "serve"
    status, error, text = fetcher.fetch()
    assert (status, error) == ("ok", None) and text.startswith("# HELP")
    assert busy_vllm.connections == 2  # the timed-out connection was dropped, a fresh one opened
    fetcher.close()


def test_it_retries_once_on_a_kept_alive_connection_the_engine_closed(busy_vllm):
    busy_vllm.drop_idle = True
    fetcher = MetricsFetcher(busy_vllm.url, timeout_s=2.0)
    assert fetcher.fetch()[0] == "ok"
    assert fetcher.fetch()[0] == "ok"
    assert (busy_vllm.requests, busy_vllm.connections) == (2, 2)
    fetcher.close()


class RawEngine:
    """A TCP server answering each request with fixed bytes, for the framings and oddities of HTTP."""

    def __init__(self, answer: bytes, close=False):
        self.answer = answer
        self.close_after = close
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                while True:
                    request = b""
                    while b"\r\n\r\n" not in request:
                        data = conn.recv(65536)
                        if not data:
                            break
                        request += data
                    if not request:
                        break
                    conn.sendall(self.answer)
                    if self.close_after:
                        break

    def close(self):
        self.listener.close()


BODY = (ENGINE_CAPTURES / "vllm-0.32.0-cpu-busy.prom").read_bytes()


def chunked(body, size=7000):
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\nX-Trailer: yes\r\n\r\n"


@pytest.mark.parametrize(("answer", "close"), [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(BODY), False),
    (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + BODY, True),  # to the end of the connection
    (b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\nConnection: close\r\n\r\n" % len(BODY) + BODY, True),
])
def test_it_reads_every_framing_of_the_answer(answer, close):
    engine = RawEngine(answer, close)
    fetcher = MetricsFetcher(engine.url, timeout_s=2.0)
    try:
        for _ in range(2):  # and again, on the kept connection or a fresh one
            status, error, text = fetcher.fetch()
            assert (status, error) == ("ok", None) and text == BODY.decode()
    finally:
        fetcher.close()
        engine.close()


@pytest.mark.parametrize(("answer", "status", "error"), [
    (b"SSH-2.0-OpenSSH_9.2p1\r\n\r\n", "http_error", "not an HTTP answer: 'SSH-2.0-OpenSSH_9.2p1'"),
    (b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found", "http_error", "HTTP 404 Not Found"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 999999999\r\n\r\n", "bad_format", "answer larger than 8 MiB"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", "unreachable", "the engine closed the connection"),
])
def test_it_names_what_was_wrong_with_an_answer(answer, status, error):
    engine = RawEngine(answer, close=True)
    fetcher = MetricsFetcher(engine.url, timeout_s=2.0)
    try:
        assert fetcher.fetch() == (status, error, None)
    finally:
        fetcher.close()
        engine.close()


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def test_the_agent_keeps_answering_and_sampling_while_its_engine_hangs(busy_vllm, two_gpus, source):
    busy_vllm.mode = "hang"
    settings = Settings(listen_port=0, report=False, sample_interval_ms=100, engine_urls=(busy_vllm.url,),
                        engine_timeout_ms=300)
    agent = Agent(settings, nvml=two_gpus, source=source)
    agent.start()
    try:
        base = f"http://127.0.0.1:{agent.server.port}"
        first = get(f"{base}/v1/resource/snapshot")
        assert first["engines"][0]["status"] == "timeout"  # the first sample waited the timeout, no longer
        assert get(f"{base}/healthz")["ok"] is True  # answered while the engine hangs
        seen = {first["timestamp_ms"]}
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 3 and time.monotonic() < deadline:  # the sampler goes on at its pace meanwhile
            seen.add(get(f"{base}/v1/resource/snapshot")["timestamp_ms"])
        assert len(seen) >= 3
        assert get(f"{base}/healthz")["ok"] is True
    finally:
        agent.stop()
