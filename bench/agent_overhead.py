"""How much does the host agent cost the host it watches?

Runs ``python -m agent`` as a child process at 1 s sampling and 1 s reporting
(to a tiny local sink that answers like a Proxy, or with ``--no-report``),
lets it settle, then measures for ``--seconds``:

- CPU: the child's user+system time over wall time, as a share of one core;
- memory: its peak resident set size (VmHWM on Linux, else the largest RSS
  seen while polling).

Targets (issue 4): at most 1 % of one core and at most 40 MB RSS.

    python bench/agent_overhead.py [--seconds 60] [--no-report]
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
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
CPU_TARGET_PCT = 1.0
RSS_TARGET_MB = 40.0
SETTLE_S = 5.0


class Sink:
    """Answers the agent's Proxy calls with success and counts them."""

    def __init__(self):
        self.counts = {}
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self):  # noqa: N802 - stdlib name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                sink.counts[self.path] = sink.counts.get(self.path, 0) + 1
                if self.path.endswith("/register"):
                    answer = {"instance_id": body.get("instance_id"), "heartbeat_interval_s": 10, "ttl_s": 30}
                else:
                    answer = {"ok": True}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured duration (default 60)")
    parser.add_argument("--no-report", action="store_true", help="run the agent without reporting")
    parser.add_argument("--interval-ms", type=int, default=1000, help="sample and report period (default 1000)")
    args = parser.parse_args(argv)

    sink = None if args.no_report else Sink()
    command = [sys.executable, "-m", "agent", "--listen", f"127.0.0.1:{free_port()}",
               "--sample-interval-ms", str(args.interval_ms), "--report-interval-ms", str(args.interval_ms),
               "--log-level", "WARNING"]
    command += ["--no-report"] if sink is None else ["--proxy-url", sink.url]
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_AGENT_")}
    child = subprocess.Popen(command, cwd=ROOT, env=env)
    process = psutil.Process(child.pid)
    try:
        time.sleep(SETTLE_S)  # imports and the first samples are start-up, not steady state
        if child.poll() is not None:
            raise SystemExit(f"agent exited early with status {child.returncode}")
        start_cpu, start_wall = process.cpu_times(), time.monotonic()
        seen_mb = 0.0
        deadline = start_wall + args.seconds
        while time.monotonic() < deadline:
            seen_mb = max(seen_mb, process.memory_info().rss / 2**20)
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        end_cpu, end_wall = process.cpu_times(), time.monotonic()
        peak_mb = peak_rss_mb(process, seen_mb)
        rss_mb = process.memory_info().rss / 2**20
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            exit_status = child.wait(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            exit_status = child.wait()
        if sink is not None:
            sink.close()

    cpu_s = (end_cpu.user - start_cpu.user) + (end_cpu.system - start_cpu.system)
    cpu_pct = 100.0 * cpu_s / (end_wall - start_wall)
    cpu_ok, rss_ok = cpu_pct <= CPU_TARGET_PCT, peak_mb <= RSS_TARGET_MB
    mode = "no-report" if sink is None else f"reporting to a local sink ({sink.counts})"
    print(f"agent: {' '.join(command[1:4])} ... every {args.interval_ms} ms, {mode}")
    print(f"measured: {end_wall - start_wall:.1f} s after {SETTLE_S:.0f} s settling; exit status {exit_status}; "
          f"host: {psutil.cpu_count()} logical CPUs, load average {os.getloadavg()[0]:.2f} (other work inflates "
          f"the agent's CPU time)")
    print(f"cpu: {cpu_s:.3f} s user+system = {cpu_pct:.3f} % of one core "
          f"(target <= {CPU_TARGET_PCT} %) {'PASS' if cpu_ok else 'FAIL'}")
    print(f"rss: peak {peak_mb:.1f} MB, at end {rss_mb:.1f} MB (target <= {RSS_TARGET_MB:.0f} MB) "
          f"{'PASS' if rss_ok else 'FAIL'}")
    print("PASS" if cpu_ok and rss_ok and exit_status == 0 else "FAIL")
    return 0 if cpu_ok and rss_ok and exit_status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
