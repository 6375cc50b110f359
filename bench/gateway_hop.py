"""The njs gateway's hop (issue 43): latency a request gains through deploy/nginx/openai-router.conf against nginx
proxying straight to the same engine, side by side in one run.

    .venv/bin/python -m bench.gateway_hop [--requests 3000] [--database-url postgres://…]

One fast engine (nginx answering a chat completion's JSON with its usage at once) and three ways to it, each
one nginx hop: ``straight`` (proxy_pass, unbuffered, as the site's engine location), ``njs + stand-in`` (the
site, its placement and feedback answered at once by nginx: what nginx and njs themselves add), and
``njs + Proxy`` (the site in front of a real Proxy's route listener, ``up`` with one instance registered:
what a client sees, placement and feedback included); and, to split the last, the Proxy's own answer to the
same body as a placement and its route listener's /healthz, asked straight. One keep-alive client per way
sends the same 1 KB chat body, the ways taking turns request by request; the figures are p50 and p99 of each and of each minus
straight. Target: p50 added ≤ 3 ms on this machine.

A keep-alive client's next request waits for the previous one's feedback (post_action holds the connection
until the Proxy answers it), so that wait is in these figures too.
"""

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.factories import make_engine, make_snapshot  # noqa: E402
from tests.live import LiveDatabase, LiveServer, free_port  # noqa: E402
from tests.openai_router import OpenAIRouter  # noqa: E402
from tests.system.test_placement_nginx import create_token  # noqa: E402

TARGET_P50_MS = 3.0
ANSWER = '{"object": "chat.completion", "usage": {"prompt_tokens": 200, "prompt_tokens_details": {"cached_tokens": 160}}}'
BODY = json.dumps({"model": "tiny", "max_tokens": 16, "messages": [
    {"role": "system", "content": "You are a careful assistant. " * 30},
    {"role": "user", "content": "What is the capital of France?"}]}).encode()


def engine_and_straight(engine_port, straight_port):
    """nginx servers: the engine, and the straight way to it (the site's engine location without njs)."""
    return f"""
    server {{
        listen 127.0.0.1:{engine_port};
        location / {{ default_type application/json; return 200 '{ANSWER}'; }}
    }}
    server {{
        listen 127.0.0.1:{straight_port};
        location / {{
            proxy_pass http://127.0.0.1:{engine_port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
"""


def stand_in(port, engine_port):
    """A placement and a feedback answered at once, in the shape the Proxy answers them."""
    placement = json.dumps({"ok": True, "verdict": "accept", "candidates": [
        {"instance_id": "bench-engine", "host": "127.0.0.1", "port": engine_port, "prefix_hit_tokens": 160}]})
    return f"""
    server {{
        listen 127.0.0.1:{port};
        location = /v1/placement {{
            default_type application/json;
            add_header x-gateway-destination-endpoint 127.0.0.1:{engine_port};
            return 200 '{placement}';
        }}
        location = /v1/placement/feedback {{ default_type application/json; return 200 '{{"ok": true, "fenced": false}}'; }}
    }}
"""


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="per way (default 3000)")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="fw-gateway-hop-"))
    engine_port, straight_port, stand_in_port, route_port = (free_port() for _ in range(4))
    if args.database_url:
        os.environ["DATABASE_URL"] = args.database_url  # LiveDatabase makes a fresh database on that server
    else:
        os.environ.pop("DATABASE_URL", None)
    database = LiveDatabase(tmp)
    server = LiveServer(tmp, roles="proxy", database=database, env={
        "FLEETWATCH_ROUTE_PORT": str(route_port), "FLEETWATCH_TRUSTED_NETWORKS": "",
        # One instance takes every request: its pending placements must not shed them.
        "FLEETWATCH_PLACEMENT_SHED_PRESSURE": "1000000000", "FLEETWATCH_INSTANCE_TTL_S": "3600"})
    processes = [server]
    try:
        server.start()
        instance = {"Authorization": f"Bearer {create_token(server, 'instance')}"}
        route_token = create_token(server, "route")
        requests.post(server.url + "/v1/instance/register", headers=instance, timeout=10, json={
            "instance_id": "bench-engine", "host": "127.0.0.1", "port": engine_port}).raise_for_status()
        now_ms = int(time.time() * 1000)
        requests.post(server.url + "/v1/instance/resource_snapshot", headers=instance, timeout=10, json={
            "instance_id": "bench-engine", "snapshot": make_snapshot(timestamp_ms=now_ms, engines=[
                make_engine(requests_waiting=0, kv_cache_usage_ratio=0.1, scraped_at_ms=now_ms)])}
        ).raise_for_status()

        with_proxy = OpenAIRouter(tmp, route_port, route_token, access_log=False,
                                  extra=engine_and_straight(engine_port, straight_port))
        with_stand_in = OpenAIRouter(tmp, stand_in_port, "stand-in", access_log=False,
                                     extra=stand_in(stand_in_port, engine_port))
        for router in (with_proxy, with_stand_in):
            processes.append(router)
            router.start()

        chat = ("/v1/chat/completions", {"Content-Type": "application/json"}, b"cached_tokens")
        # The Proxy's own share, asked straight: the same body as a placement (what the site's subrequest costs
        # the Proxy), and the route listener's /healthz (the floor of any answer through it).
        asked = ("/v1/placement", {"Content-Type": "application/json", "Authorization": f"Bearer {route_token}"},
                 b"candidates")
        ways = {"straight": (straight_port, chat), "njs + stand-in": (with_stand_in.port, chat),
                "njs + Proxy": (with_proxy.port, chat), "Proxy placement": (route_port, asked),
                "Proxy /healthz": (route_port, ("/healthz", {}, b""))}
        connections = {name: http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                       for name, (port, _) in ways.items()}
        timings = {name: [] for name in ways}
        for round_ in range(args.requests + 100):
            for name, connection in connections.items():
                path, headers, expected = ways[name][1]
                started = time.perf_counter()
                if path == "/healthz":
                    connection.request("GET", path)
                else:
                    connection.request("POST", path, body=BODY, headers=headers)
                response = connection.getresponse()
                answer = response.read()
                elapsed_ms = (time.perf_counter() - started) * 1000
                assert response.status == 200 and expected in answer, (name, response.status, answer)
                if round_ >= 100:  # warm-up: connections, the Proxy's caches
                    timings[name].append(elapsed_ms)

        base = timings["straight"]
        print(f"{args.requests} requests per way, taking turns; database "
              f"{'PostgreSQL' if args.database_url else 'SQLite'}")
        print(f"{'way':<16} {'p50 ms':>8} {'p99 ms':>8} {'added p50':>10} {'added p99':>10}")
        for name, values in timings.items():
            p50, p99 = statistics.median(values), percentile(values, 0.99)
            added = "" if name in ("straight", "Proxy /healthz") else \
                f"{p50 - statistics.median(base):>10.2f} {p99 - percentile(base, 0.99):>10.2f}"
            print(f"{name:<16} {p50:>8.2f} {p99:>8.2f} {added}")
        added_p50 = statistics.median(timings["njs + Proxy"]) - statistics.median(base)
        print(f"target: p50 added ≤ {TARGET_P50_MS} ms through the Proxy: "
              f"{'met' if added_p50 <= TARGET_P50_MS else 'not met'} ({added_p50:.2f} ms)")
    finally:
        for process in reversed(processes):
            process.stop()
        database.drop()


if __name__ == "__main__":
    main()
