"""How much does the host agent cost the host it watches?

Runs ``python -m agent`` as a child process at 1 s sampling and 1 s reporting
(to a tiny local sink that answers like a Proxy, or with ``--no-report``),
lets it settle, then measures for ``--seconds``:

- CPU: the child's user+system time over wall time, as a share of one core;
- memory: its peak resident set size (VmHWM on Linux, else the largest RSS
  seen while polling).

Targets (issue 4): at most 1 % of one core and at most 40 MB RSS.

With ``--engine`` (issue 18) the run is two measurements taking turns, the
same agent without and with one serving engine scraped on every sample tick
(default every 250 ms): the engine is a local HTTP server in this process
answering the real vLLM 0.32 capture (``tests/agent/data/engines``), or the
engine at ``--engine-url``. Target: at most 1 % of one core with the engine.

    python bench/agent_overhead.py [--seconds 60] [--no-report]
    python bench/agent_overhead.py --engine [--sample-interval-ms 250] [--seconds 60] [--rounds 2]
    python bench/agent_overhead.py --engine --engine-url http://127.0.0.1:8000

With ``--kv-events`` (issue 32) the "with engine" agent also subscribes to a
synthetic vLLM KV-event publisher in this process (pyzmq, the ``kv-events``
extra) sending ``--kv-rate`` stored and as many removed 16-token blocks a
second (default 1,000 + 1,000, in 100 batches/s, chained as vLLM chains a
prompt's blocks), and reports the prefix deltas to the sink; with
``--engine-interval-ms`` the host is sampled every ``--sample-interval-ms``
and the engine scraped at its own period (issue 32's shape: 1000 and 250).
``--kv-memory N`` instead measures the agent's resident memory before and
after the publisher stores N blocks (default 100,000) that stay resident.

    python bench/agent_overhead.py --engine --kv-events --sample-interval-ms 1000 --engine-interval-ms 250
    python bench/agent_overhead.py --kv-memory 100000

``--threads`` also prints each run's CPU per thread of the agent (Linux; thread
names from ``py-spy dump`` when py-spy, of the bench extra, is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent_threads import thread_cpu, thread_names, thread_report  # noqa: E402
from tests.fake_http import FakeHandler  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CPU_TARGET_PCT = 1.0
RSS_TARGET_MB = 40.0
SETTLE_S = 5.0


class Sink:
    """Answers the agent's Proxy calls with success and counts them."""

    def __init__(self):
        self.counts = {}
        sink = self

        class Handler(FakeHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self):  # noqa: N802 - stdlib name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                sink.counts[self.path] = sink.counts.get(self.path, 0) + 1
                if self.path.endswith("/prefix_blocks"):
                    sink.prefix_items = getattr(sink, "prefix_items", 0) + len(body["added"]) + len(body["removed"])
                    answer = {"ok": True, "resync": False}
                elif self.path.endswith("/register"):
                    answer = {"instance_id": body.get("instance_id"), "heartbeat_interval_s": 10, "ttl_s": 30}
                else:
                    answer = {"ok": True}
                self.answer(json.dumps(answer).encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peak_rss_mb(process, seen_mb):
    """Kernel's high-water mark when available: it catches peaks between polls."""
    try:
        with open(f"/proc/{process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return seen_mb


class CaptureEngine:
    """A serving engine's /metrics, answered from a real capture (kept-alive, as uvicorn does)."""

    def __init__(self, body: bytes):
        self.scrapes = 0
        engine = self

        class Handler(FakeHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_GET(self):  # noqa: N802 - stdlib name
                engine.scrapes += 1
                self.answer(body, "text/plain; version=0.0.4; charset=utf-8")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class KvPublisher:
    """vLLM's KV-event wire from a thread: ``rate`` stored and ``rate`` removed blocks a second (16 tokens each)."""

    BATCHES_PER_S = 100
    CHAIN = 64  # blocks per simulated prompt: a new chain (parent null) after that many

    def __init__(self, rate, keep=5000, stored_only=False):
        import msgpack
        import zmq

        self._packb = msgpack.packb
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PUB)
        self.port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.rate, self.keep, self.stored_only = rate, keep, stored_only
        self.seq = self.next_hash = self.stored = self.removed = 0
        self.resident = []
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def batch(self, count):
        hashes, events = [], []
        parent = self.resident[-1] if self.resident and self.next_hash % self.CHAIN else None
        for _ in range(count):
            self.next_hash += 1
            hashes.append(self.next_hash)
        tokens = [(h * 31 + n) % 32000 for h in hashes for n in range(16)]
        events.append({"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
                       "token_ids": tokens, "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None})
        self.resident.extend(hashes)
        self.stored += count
        if not self.stored_only and len(self.resident) > self.keep:
            gone, self.resident = self.resident[:count], self.resident[count:]
            events.append({"type": "BlockRemoved", "block_hashes": gone, "medium": "GPU"})
            self.removed += len(gone)
        payload = self._packb([time.time(), events, 0])
        self.socket.send_multipart((b"", self.seq.to_bytes(8, "big"), payload))
        self.seq += 1

    def _run(self):
        per_batch = max(1, self.rate // self.BATCHES_PER_S)
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            self.batch(per_batch)
            next_at += 1.0 / self.BATCHES_PER_S
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))

    def close(self):
        self.stop_event.set()
        if self.thread.ident is not None:
            self.thread.join(5)
        self.socket.close(0)
        self.context.term()


def kv_memory(blocks, engine):
    """The agent's RSS before and after ``blocks`` stored blocks stay resident (its figures, over HTTP)."""
    import urllib.request

    publisher = KvPublisher(0, stored_only=True)
    listen = free_port()
    command = [sys.executable, "-m", "agent", "--listen", f"127.0.0.1:{listen}", "--no-report",
               "--engine-url", engine.url, "--engine-kv-events", publisher.endpoint, "--log-level", "WARNING"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_AGENT_")}
    child = subprocess.Popen(command, cwd=ROOT, env=env)
    process = psutil.Process(child.pid)

    def resident():
        with urllib.request.urlopen(f"http://127.0.0.1:{listen}/v1/resource/snapshot", timeout=5) as answer:
            return json.load(answer)["engines"][0]["kv_events"]["resident_blocks"]

    try:
        time.sleep(SETTLE_S)
        while resident() == 0:  # a PUB drops what it sends before the SUB has joined
            publisher.batch(1)
            time.sleep(0.2)
        time.sleep(2.0)
        base_mb = process.memory_info().rss / 2**20
        start = resident()
        while publisher.stored < blocks + start:
            publisher.batch(min(500, blocks + start - publisher.stored))
            time.sleep(0.01)
        deadline = time.monotonic() + 60
        while resident() < blocks + start and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2.0)
        after_mb = process.memory_info().rss / 2**20
        held = resident() - start
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=15)
        publisher.close()
    above = after_mb - base_mb
    print(f"kv memory: {held} blocks resident (16 tokens, one key each): rss {base_mb:.1f} MB before, "
          f"{after_mb:.1f} MB after = {above:.1f} MB above base, {above * 2**20 / max(1, held):.0f} bytes per block "
          f"(target <= 25 MB per 100,000) {'PASS' if above * 100_000 / max(1, held) <= 25 else 'FAIL'}")
    return above * 100_000 / max(1, held) <= 25


def measure(command, seconds, threads=False):
    """Run the agent ``command``, settle, measure ``seconds``: (cpu s, wall s, peak MB, end MB, exit status)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_AGENT_")}
    child = subprocess.Popen(command, cwd=ROOT, env=env)
    process = psutil.Process(child.pid)
    try:
        time.sleep(SETTLE_S)  # imports and the first samples are start-up, not steady state
        if child.poll() is not None:
            raise SystemExit(f"agent exited early with status {child.returncode}")
        names = thread_names(child.pid) if threads else None
        start_threads = thread_cpu(child.pid) if threads else None
        start_cpu, start_wall = process.cpu_times(), time.monotonic()
        seen_mb = 0.0
        deadline = start_wall + seconds
        while time.monotonic() < deadline:
            seen_mb = max(seen_mb, process.memory_info().rss / 2**20)
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        end_cpu, end_wall = process.cpu_times(), time.monotonic()
        if threads:
            print(thread_report(start_threads, thread_cpu(child.pid), names, end_wall - start_wall))
        peak_mb = peak_rss_mb(process, seen_mb)
        rss_mb = process.memory_info().rss / 2**20
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            exit_status = child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            exit_status = child.wait()
    cpu_s = (end_cpu.user - start_cpu.user) + (end_cpu.system - start_cpu.system)
    return cpu_s, end_wall - start_wall, peak_mb, rss_mb, exit_status


def verdict(label, result):
    cpu_s, wall_s, peak_mb, rss_mb, exit_status = result
    cpu_pct = 100.0 * cpu_s / wall_s
    cpu_ok, rss_ok = cpu_pct <= CPU_TARGET_PCT, peak_mb <= RSS_TARGET_MB
    print(f"{label}: cpu {cpu_s:.3f} s user+system over {wall_s:.1f} s = {cpu_pct:.3f} % of one core "
          f"(target <= {CPU_TARGET_PCT} %) {'PASS' if cpu_ok else 'FAIL'}; rss peak {peak_mb:.1f} MB, at end "
          f"{rss_mb:.1f} MB (target <= {RSS_TARGET_MB:.0f} MB) {'PASS' if rss_ok else 'FAIL'}; exit {exit_status}")
    return cpu_pct, cpu_ok and rss_ok and exit_status == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured duration of each run (default 60)")
    parser.add_argument("--no-report", action="store_true", help="run the agent without reporting")
    parser.add_argument("--interval-ms", type=int, default=1000, help="report period, and the sample period "
                        "unless --sample-interval-ms is given (default 1000)")
    parser.add_argument("--sample-interval-ms", type=int, default=None,
                        help="sample (and engine scrape) period (default: --interval-ms; with --engine 250)")
    parser.add_argument("--engine", action="store_true",
                        help="measure without and with one engine scraped on every tick, taking turns")
    parser.add_argument("--engine-url", default=None, help="scrape this engine instead of the local capture")
    parser.add_argument("--rounds", type=int, default=1, help="with --engine: pairs of runs (default 1)")
    parser.add_argument("--engine-interval-ms", type=int, default=None,
                        help="with --engine: scrape the engine at this period of its own (the agent's flag)")
    parser.add_argument("--kv-events", action="store_true",
                        help="with --engine: the engine also publishes KV-cache events (synthetic, this process)")
    parser.add_argument("--kv-rate", type=int, default=1000, help="stored (and removed) blocks a second "
                        "(default 1000)")
    parser.add_argument("--threads", action="store_true", help="print each run's CPU per thread of the agent")
    parser.add_argument("--kv-memory", type=int, default=None, metavar="N",
                        help="measure the agent's memory with N resident blocks instead (100000 for issue 32)")
    args = parser.parse_args(argv)
    sample_ms = args.sample_interval_ms or (250 if args.engine else args.interval_ms)
    capture = ROOT / "tests" / "agent" / "data" / "engines" / "vllm-0.32.0-cpu-idle.prom"
    if args.kv_memory:
        engine = CaptureEngine(capture.read_bytes())
        try:
            return 0 if kv_memory(args.kv_memory, engine) else 1
        finally:
            engine.close()

    sink = None if args.no_report else Sink()
    engine = None
    if args.engine and not args.engine_url:
        engine = CaptureEngine(capture.read_bytes())
    publisher = KvPublisher(args.kv_rate).start() if args.kv_events else None
    engine_url = args.engine_url or (engine.url if engine else None)
    command = [sys.executable, "-m", "agent", "--listen", f"127.0.0.1:{free_port()}",
               "--sample-interval-ms", str(sample_ms), "--report-interval-ms", str(args.interval_ms),
               "--log-level", "WARNING"]
    command += ["--no-report"] if sink is None else ["--proxy-url", sink.url]
    mode = "no-report" if sink is None else "reporting to a local sink"
    print(f"agent: sampling every {sample_ms} ms, reporting every {args.interval_ms} ms, {mode}; host: "
          f"{psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f} at start (other work "
          f"inflates the agent's CPU time)")
    passed = True
    try:
        if not args.engine:
            passed = verdict("agent", measure(command, args.seconds, args.threads))[1]
        else:
            with_engine = command + ["--engine-url", engine_url]
            if args.engine_interval_ms:
                with_engine += ["--engine-interval-ms", str(args.engine_interval_ms)]
            if publisher is not None:
                with_engine += ["--engine-kv-events", publisher.endpoint]
            figures = {"without engine": [], "with engine": []}
            for round_number in range(args.rounds):
                # Taking turns, so drifting neighbour load falls on both alike.
                order = [("without engine", command), ("with engine", with_engine)]
                for label, argv_ in (order if round_number % 2 == 0 else order[::-1]):
                    pct, ok = verdict(f"round {round_number + 1}, {label}", measure(argv_, args.seconds, args.threads))
                    figures[label].append(pct)
                    passed &= ok
            without, with_ = (sum(figures[k]) / len(figures[k]) for k in ("without engine", "with engine"))
            print(f"mean: without engine {without:.3f} %, with engine {with_:.3f} % of one core; the engine "
                  f"adds {with_ - without:.3f} points ({engine.scrapes if engine else '?'} scrapes answered)")
            if publisher is not None:
                print(f"kv events: {publisher.stored} blocks stored, {publisher.removed} removed by the publisher; "
                      f"{getattr(sink, 'prefix_items', 0)} keys sent to the sink")
    finally:
        if sink is not None:
            sink.close()
        if engine is not None:
            engine.close()
        if publisher is not None:
            publisher.close()
    print(f"load average at end {os.getloadavg()[0]:.2f}")
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
