"""Reports under a routing flood (issue 30, item 2): report latency without and with a flood of placements and
of feedback for unknown instances, side by side in one run, against ``up`` as it runs by default.

    .venv/bin/python -m bench.flood [--instances 500] [--seconds 20] [--placements 200] [--feedbacks 10000]
                                    [--flood-retry honour|ignore] [--routes-to route|web]
                                    [--database-url postgres://…] [--env FLEETWATCH_ROUTE_SHARE=1 …]

Starts ``manage.py up --no-agent`` (two web processes on two cores, and the route listener) on a fresh database, registers
``--instances`` instances and has them report a snapshot each second (one engine each, so placement ranks
them) from 25 keep-alive connections, every report timed. Then, in turns of ``--seconds``:

1. quiet: the reports alone;
2. a placement flood: ``--placements`` clients (in two processes), each asking ``POST /v1/placement``
   again as soon as it has its answer, beside the reports;
3. quiet again;
4. a feedback flood: ``--feedbacks`` ``error`` feedbacks for unknown instance ids, 50 at once.

A 429 answer's ``Retry-After`` is honoured by a flood client (a router following SPEC section 1) unless
``--flood-retry ignore``, when it asks again at once (a router that ignores it). The flood's clients share
the machine's cores with the server, as the issue's probe did. Target (issue 30): report p99 during each
flood ≤ 3 × the quiet p99, placement still answered (a 429 with Retry-After beyond the route concurrency).
"""

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import threading
import time
from collections import Counter

import requests

from bench.common import PYTHON, ROOT, Deployment, free_port, realistic_engine, realistic_snapshot

REPORT_CONNECTIONS = 25
FLOOD_PROCESSES = 2
FEEDBACK_AT_ONCE = 50
SETTLE_S = 5
MODEL = "meta-llama/Llama-3.1-70B-Instruct"


def connection(port):
    return http.client.HTTPConnection("127.0.0.1", port, timeout=60)


def post(conn, port, path, body, token):
    """``(status, headers, seconds)`` of one POST on a kept-alive connection (a new one after a close)."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    started = time.perf_counter()
    try:
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        response.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        return conn, None, {}, time.perf_counter() - started
    if response.getheader("Connection", "").lower() == "close":
        conn.close()
    return conn, response.status, dict(response.getheaders()), time.perf_counter() - started


def reporter(port, token, ids, stop, results):
    """Each of ``ids`` reports once a second, spread evenly; every report's (sent at, latency, status)."""
    conn = connection(port)
    snapshot = realistic_snapshot(1)
    interval = 1.0 / len(ids)
    seq, start = 0, time.monotonic()
    timings = []
    while not stop.is_set():
        instance_id = ids[seq % len(ids)]
        engine = realistic_engine()
        engine.update(requests_waiting=seq % 5, kv_cache_usage_ratio=round((seq % 70) / 100, 2),
                      scraped_at_ms=int(time.time() * 1000))
        snapshot["engines"] = [engine]
        body = json.dumps({"instance_id": instance_id, "snapshot": snapshot,
                           "metadata": {"report_seq": 10 + seq, "report_wall_time_ms": int(time.time() * 1000)}})
        sent = time.time()
        conn, status, _, seconds = post(conn, port, "/v1/instance/resource_snapshot", body, token)
        # From the moment it was due too: a report waiting on its connection's previous one is late as well.
        late = max(0.0, time.monotonic() - (start + seq * interval))
        timings.append((sent, seconds * 1000, late * 1000, status))
        seq += 1
        delay = start + seq * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    results.put(timings)


def flood_client(port, token, path, bodies, honour, stop, counts, lock):
    conn = connection(port)
    for body in bodies:
        if stop.is_set():
            break
        conn, status, headers, seconds = post(conn, port, path, body, token)
        with lock:
            counts[status] += 1
            counts["ms"] += seconds * 1000
        if status == 429 and honour:
            stop.wait(float(headers.get("Retry-After", 1)))


def flood(port, token, path, clients, bodies, honour, stop, results, own_session):
    """``clients`` threads sending ``bodies`` (an iterator per client) until done or ``stop``; answers by status.
    ``own_session``: in a session of its own, as a router is a program of its own, not one of the agents'
    (with the kernel's autogroups on, the scheduler shares the cores between sessions first)."""
    if own_session:
        os.setsid()
    counts, lock = Counter(), threading.Lock()
    threads = [threading.Thread(target=flood_client, args=(port, token, path, body, honour, stop, counts, lock))
               for body in bodies(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(dict(counts))


def placements(clients):
    body = json.dumps({"model": MODEL, "count": 3})
    return [iter(lambda: body, None) for _ in range(clients)]


def feedbacks(total, process):
    def _bodies(clients):
        share = total // FLOOD_PROCESSES // clients
        return [(json.dumps({"instance_id": f"ghost-{process}-{client}-{n}", "outcome": "error", "status_code": 502})
                 for n in range(share)) for client in range(clients)]
    return _bodies


def run_flood(port, token, path, clients, bodies_of, honour, seconds, own_session):
    """The flood in ``FLOOD_PROCESSES`` processes; ``(answers by status, requests/s, mean ms)``."""
    stop, results = multiprocessing.Event(), multiprocessing.Queue()
    processes = [multiprocessing.Process(target=flood, args=(port, token, path, clients // FLOOD_PROCESSES,
                                                             bodies_of(n), honour, stop, results, own_session))
                 for n in range(FLOOD_PROCESSES)]
    started = time.time()
    for process in processes:
        process.start()
    deadline = started + seconds
    while time.time() < deadline and any(process.is_alive() for process in processes):
        time.sleep(0.1)
    stop.set()
    counts = Counter()
    for _ in processes:
        counts.update(results.get())
    ended = time.time()
    for process in processes:
        process.join()
    answered = sum(n for status, n in counts.items() if status != "ms")
    return started, ended, counts, answered


def percentiles(values):
    values = sorted(values)
    return statistics.median(values), values[max(0, int(len(values) * 0.99) - 1)], len(values)


def start_up(deployment, extra_env, route_port):
    port = free_port()
    env = {**deployment.env, "FLEETWATCH_ROUTE_PORT": str(route_port), **extra_env}
    log = open(deployment.workdir / "up.log", "wb")
    process = subprocess.Popen([PYTHON, "manage.py", "up", "--no-agent", "--host", "127.0.0.1", "--port", str(port)],
                               env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).ok:
                return process, port
        except requests.RequestException:
            time.sleep(0.3)
    process.terminate()
    raise SystemExit(f"up did not start; see {deployment.workdir / 'up.log'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each turn")
    parser.add_argument("--placements", type=int, default=200, help="concurrent placement clients")
    parser.add_argument("--feedbacks", type=int, default=10_000)
    parser.add_argument("--flood-retry", choices=["honour", "ignore"], default="honour")
    parser.add_argument("--routes-to", choices=["route", "web"], default="route",
                        help="where the flood goes: the route listener `up` starts (default), or the web port "
                             "(the route gate alone)")
    parser.add_argument("--flood-session", choices=["own", "shared"], default="own",
                        help="the flood's processes each in a session of their own (default: a router is a program "
                             "of its own), or in the reporters' (the bench's) session")
    parser.add_argument("--database-url")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for up (repeatable)")
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)

    deployment = Deployment(args.database_url, roles="proxy,scheduler", FLEETWATCH_AUTH="on")
    up = None
    try:
        tokens = {scope: deployment.token(scope, f"flood-{scope}") for scope in ("instance", "route")}
        route_port = free_port() if args.routes_to == "route" else 0
        up, port = start_up(deployment, extra, route_port)
        flood_port = route_port or port
        session = requests.Session()
        for n in range(args.instances):
            session.post(f"http://127.0.0.1:{port}/v1/instance/register", timeout=30,
                         headers={"Authorization": f"Bearer {tokens['instance']}"},
                         json={"instance_id": f"flood-{n}", "host": "10.0.0.1", "port": 1 + n}).raise_for_status()
        stop, results = multiprocessing.Event(), multiprocessing.Queue()
        ids = [f"flood-{n}" for n in range(args.instances)]
        reporters = [multiprocessing.Process(target=reporter, args=(port, tokens["instance"],
                                                                    ids[k::REPORT_CONNECTIONS], stop, results))
                     for k in range(REPORT_CONNECTIONS)]
        for process in reporters:
            process.start()
        time.sleep(5)  # warm: the boards built, every instance reported
        honour = args.flood_retry == "honour"
        turns = []
        turns.append(("quiet", time.time(), time.time() + args.seconds, None))
        time.sleep(args.seconds)
        started, ended, counts, answered = run_flood(flood_port, tokens["route"], "/v1/placement", args.placements,
                                                     lambda n: placements, honour, args.seconds,
                                                     args.flood_session == "own")
        turns.append((f"{args.placements} placements at once", started, ended, (counts, answered)))
        time.sleep(SETTLE_S)  # the reports sent late during the flood caught up
        quiet = time.time()
        time.sleep(args.seconds)
        turns.append(("quiet", quiet, time.time(), None))
        started, ended, counts, answered = run_flood(flood_port, tokens["route"], "/v1/placement/feedback",
                                                     FEEDBACK_AT_ONCE, lambda n: feedbacks(args.feedbacks, n), honour,
                                                     max(args.seconds, 120), args.flood_session == "own")
        turns.append((f"{answered} unknown-id feedbacks, {FEEDBACK_AT_ONCE} at once", started, ended,
                      (counts, answered)))
        stop.set()
        timings = [timing for _ in reporters for timing in results.get()]
        for process in reporters:
            process.join()

        print(f"{deployment.vendor}, up --no-agent (workers: {os.cpu_count()} cores), {args.instances} instances "
              f"reporting at 1 Hz, flood clients {'honour' if honour else 'ignore'} Retry-After, flood to the {args.routes_to} port from "
              f"{args.flood_session} sessions, "
              f"env {extra or 'default'}")
        quiet_p99 = []
        for name, start, end, flood_counts in turns:
            window = [timing for timing in timings if start <= timing[0] < end]
            p50, p99, count = percentiles([latency for _, latency, _, _ in window])
            due99 = percentiles([late for _, _, late, _ in window])[1]
            failed = sum(1 for *_, status in window if status != 200)
            line = (f"  {name:<40} reports p50 {p50:6.1f} ms  p99 {p99:6.1f} ms  (p99 from due {due99:6.1f} ms; "
                    f"{count} reports, {failed} not 200)")
            if flood_counts is None:
                quiet_p99.append(p99)
            else:
                counts, answered = flood_counts
                mean = counts.pop("ms", 0.0) / max(1, answered)
                line += (f"  p99 {p99 / max(quiet_p99):.1f}× quiet · flood answers "
                         f"{dict(sorted(counts.items(), key=str))} ({answered / (end - start):.0f}/s, "
                         f"mean {mean:.1f} ms)")
            print(line, flush=True)
    finally:
        if up is not None:
            up.terminate()
            up.wait(60)
        deployment.cleanup()


if __name__ == "__main__":
    main()
