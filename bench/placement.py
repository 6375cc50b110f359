"""Placement latency beside the same server's /healthz, while snapshots are being ingested (issue 19's targets).

    .venv/bin/python -m bench.placement [--instances 10000] [--rate 1000] [--samples 3000] [--proxies 1000]
                                        [--database-url postgres://…]
                                        [--prefix --prefix-keys 1000 --prefix-rate 1000]

One deployment, one web server as ``up`` runs it (granian ×2). The pool is
seeded with ``--instances`` reporting instances, each with one vLLM engine;
a separate process then ingests ``--rate`` snapshots a second over HTTP
(each with new queue and KV figures, so the boards keep refreshing) while
one keep-alive client alternates ``GET /healthz`` and ``POST /v1/placement``
(and, with ``--proxies``, the Scheduler's ``POST /v1/proxy/placement`` over
that many proxies heartbeating every 5 s). Targets: placement p50 ≤ 2 ×
/healthz p50 and p99 ≤ 3 × /healthz p99, for both. Freshness is checked
too: how far the answer's newest signal is behind the newest report ingested.

With ``--prefix`` (issue 32, ``bench/prefix_index.py``): every instance also
holds ``--prefix-keys`` keys in the pool prefix index and publishes KV-cache
events, ``--prefix-rate`` prefix-block bodies a second arrive beside the
snapshots, and placement is asked with a 4,096-token prompt as token ids;
the index's bytes per key in one process are measured after. With
``--text`` besides (issue 43), the Proxy is given the tests' tiny tokenizer for
the model, and placement is asked with chats (a tenant's ~4,000-token system
prompt seen before, a new ~100-token user turn each) and with cold ~4,000-token
text prompts: the whole path, tokenization included.
"""

import argparse
import http.client
import json
import multiprocessing
import random
import statistics
import time
from pathlib import Path

from bench import prefix_index
from bench.common import Deployment, WebServer, realistic_engine, realistic_snapshot

SEED = """
import sys, time
import django
django.setup()
from proxy_app.models import Instance, InstanceResource, InstanceSnapshot
from proxy_app.ingest.normalise import normalise_snapshot
from bench.common import realistic_engine, realistic_snapshot
count = int(sys.argv[1])
now = time.time()
instances, resources, snapshots = [], [], []
for i in range(count):
    snapshot = realistic_snapshot(1)
    engine = realistic_engine()
    engine.update(requests_waiting=i % 9, kv_cache_usage_ratio=(i % 80) / 100, scraped_at_ms=int(now * 1000))
    snapshot["engines"] = [engine]
    columns = normalise_snapshot(snapshot, {"report_seq": 1}, now)
    instances.append(Instance(instance_id=f"bench-{i}", host=f"10.{i // 65000}.{i // 250 % 250}.{i % 250}",
                              port=8000, registered_at=now, last_seen_at=now, had_ok_engine=True))
    snapshots.append(InstanceSnapshot(instance_id=f"bench-{i}", raw_resource=columns.pop("raw_resource")))
    resources.append(InstanceResource(instance_id=f"bench-{i}", has_raw_resource=True, **columns))
Instance.objects.bulk_create(instances, batch_size=1000)
InstanceResource.objects.bulk_create(resources, batch_size=500)
InstanceSnapshot.objects.bulk_create(snapshots, batch_size=500)
"""


def _connection(url):
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


def ingest(url, token, count, rate, stop, prefix="bench-", engine_extra=None, first_seq=0):
    """Send ``rate`` snapshots a second, round robin over the pool (``prefix`` + number), until ``stop`` is set;
    ``engine_extra``: fields every engine object adds (``kv_events``); ``first_seq``: above every report_seq an
    earlier run sent."""
    connection = _connection(url)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    snapshot = realistic_snapshot(1)
    rng = random.Random(1)
    seq, started = first_seq, time.monotonic()
    while not stop.is_set():
        seq += 1
        instance = f"{prefix}{seq % count}"
        engine = realistic_engine()
        engine.update(requests_waiting=rng.randint(0, 12), kv_cache_usage_ratio=round(rng.random(), 3),
                      scraped_at_ms=int(time.time() * 1000), **(engine_extra or {}))
        snapshot["engines"] = [engine]
        body = json.dumps({"instance_id": instance, "snapshot": snapshot,
                           "metadata": {"report_seq": 10 + seq, "report_wall_time_ms": int(time.time() * 1000)}})
        connection.request("POST", "/v1/instance/resource_snapshot", body, headers)
        connection.getresponse().read()
        delay = started + (seq - first_seq) / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def heartbeats(url, token, proxies, stop):
    """Every proxy heartbeats every 5 s with a pool summary whose saturation moves."""
    connection = _connection(url)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    rng = random.Random(2)
    beat, started = 0, time.monotonic()
    while not stop.is_set():
        proxy = f"pxy-{beat % proxies}"
        summary = {"schema_version": 1, "proxy_id": proxy, "instances": {"alive": rng.randint(1, 50)},
                   "pool_admission_state": "accepting",
                   "engine": {"saturation": round(rng.random(), 3), "models": [{"model": "llama", "instances": 4}]}}
        connection.request("POST", "/v1/proxy/heartbeat", json.dumps({"proxy_id": proxy, "pool_resource": summary}),
                           headers)
        connection.getresponse().read()
        beat += 1
        delay = started + beat / (proxies / 5.0) - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def register_proxies(url, token, proxies):
    connection = _connection(url)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    for n in range(proxies):
        connection.request("POST", "/v1/proxy/register", json.dumps(
            {"proxy_id": f"pxy-{n}", "host": "10.8.0.1", "port": 1 + n}), headers)
        connection.getresponse().read()


def alternate(url, token, samples, placement_path, body):
    """Alternate /healthz and a placement on one keep-alive connection: milliseconds of each, and answers."""
    connection = _connection(url)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    health, placed, answers = [], [], []
    bodies = body if isinstance(body, list) else [body]
    for n in range(samples + 50):
        started = time.perf_counter()
        connection.request("GET", "/healthz")
        connection.getresponse().read()
        middle = time.perf_counter()
        connection.request("POST", placement_path, bodies[n % len(bodies)], headers)
        try:
            response = connection.getresponse()
        except TimeoutError:
            raise SystemExit(f"no answer to body {n % len(bodies)} within 30 s: {bodies[n % len(bodies)][:300]}")
        answer = response.read()
        done = time.perf_counter()
        if n >= 50:  # the first answers build the boards
            health.append((middle - started) * 1000)
            placed.append((done - middle) * 1000)
            if n % 100 == 0:
                answers.append((response.status, json.loads(answer)))
    return health, placed, answers


GIVE_UP_S = 5.0


def freshness(url, tokens, rounds=20):
    """Seconds from a report's answer to the first placement that reflects it: a report names a model no
    other instance serves, then placement for that model is asked until it answers (each web process
    keeps its own board, so this is the slower of the two as it happens)."""
    connection = _connection(url)
    lags = []
    for n in range(rounds):
        model = f"marker-{n}"
        snapshot = realistic_snapshot(1)
        snapshot["engines"] = [{**realistic_engine(), "model": model, "requests_waiting": 0,
                                "kv_cache_usage_ratio": 0.1, "scraped_at_ms": int(time.time() * 1000)}]
        body = json.dumps({"instance_id": f"bench-{n}", "snapshot": snapshot,
                           "metadata": {"report_seq": 10**12 + n, "report_wall_time_ms": int(time.time() * 1000)}})
        connection.request("POST", "/v1/instance/resource_snapshot", body,
                           {"Content-Type": "application/json", "Authorization": f"Bearer {tokens['instance']}"})
        connection.getresponse().read()
        stored = time.perf_counter()
        while time.perf_counter() - stored < GIVE_UP_S:
            connection.request("POST", "/v1/placement", json.dumps({"model": model}),
                               {"Content-Type": "application/json", "Authorization": f"Bearer {tokens['route']}"})
            response = connection.getresponse()
            response.read()
            if response.status == 200:
                break
        lags.append(time.perf_counter() - stored)  # GIVE_UP_S when it never showed: a miss, not a hang
        time.sleep(0.1)
    return max(lags), statistics.median(lags)


def percentiles(values):
    values = sorted(values)
    return statistics.median(values), values[int(len(values) * 0.99) - 1]


def report(what, health, placed, targets=(2, 3)):
    h50, h99 = percentiles(health)
    p50, p99 = percentiles(placed)
    print(f"{what}: /healthz p50 {h50:.3f} ms p99 {h99:.3f} ms · placement p50 {p50:.3f} ms p99 {p99:.3f} ms · "
          f"p50 {p50 / h50:.2f}× (target ≤ {targets[0]:g}) · p99 {p99 / h99:.2f}× (target ≤ {targets[1]:g})")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1000.0, help="snapshots a second while measuring")
    parser.add_argument("--samples", type=int, default=3000)
    parser.add_argument("--proxies", type=int, default=1000, help="0 skips the Scheduler's placement")
    parser.add_argument("--database-url")
    parser.add_argument("--prefix", action="store_true", help="issue 32: the pool prefix index, prompts")
    parser.add_argument("--prefix-keys", type=int, default=1000, help="keys indexed per instance")
    parser.add_argument("--prefix-rate", type=float, default=1000.0, help="prefix-block bodies a second")
    parser.add_argument("--text", action="store_true", help="issue 43: with --prefix, chats and text prompts too")
    parser.add_argument("--compare", metavar="ROOT", help="another source tree (a worktree of another commit): "
                        "its server and this one's take turns on the same seeded database, --rounds each")
    parser.add_argument("--rounds", type=int, default=1, help="with --compare: turns of each tree")
    args = parser.parse_args()

    # The route lane's gate off (issue 30): one client asking in a loop is what it would refuse, and a refusal
    # is not the placement this measures.
    tokenizers = {"FLEETWATCH_TOKENIZERS": json.dumps({prefix_index.MODEL: str(prefix_index.TOKENIZER_DIR)})}
    deployment = Deployment(args.database_url, roles="proxy,scheduler", FLEETWATCH_AUTH="on", FLEETWATCH_ROUTE_SHARE=1,
                            **(tokenizers if args.text else {}))
    try:
        deployment.python(SEED, args.instances)
        if args.prefix:
            print(deployment.python(prefix_index.SEED, args.instances, args.prefix_keys).strip())
        deployment.analyze()
        tokens = {scope: deployment.token(scope, f"bench-{scope}") for scope in ("instance", "route", "proxy")}
        trees = [deployment.root] if not args.compare else [Path(args.compare).resolve(), deployment.root]
        state = {"sent": multiprocessing.Value("q", 0), "turn": 0, "proxies_registered": False}
        for turn in range(args.rounds if args.compare else 1):
            for root in trees:
                label = f" [{root}, turn {turn + 1}]" if args.compare else ""
                measure(args, deployment.on(root), tokens, state, label, last=root == trees[-1])
        if args.prefix:
            print("  " + deployment.python(prefix_index.MEMORY).strip())
    finally:
        deployment.cleanup()


def measure(args, deployment, tokens, state, label, last=True):
    """One server of ``deployment`` under the loads: the placements beside /healthz."""
    server = WebServer(deployment)
    state["turn"] += 1
    try:
        if not state["proxies_registered"]:
            register_proxies(server.url, tokens["proxy"], args.proxies)
            state["proxies_registered"] = True
        stop = multiprocessing.Event()
        extra = {"kv_events": prefix_index.KV_EVENTS_OK} if args.prefix else None
        loaders = [multiprocessing.Process(target=ingest, args=(server.url, tokens["instance"], args.instances,
                                                                args.rate, stop, "bench-", extra,
                                                                10**7 * state["turn"]))]
        if args.prefix:
            loaders.append(multiprocessing.Process(target=prefix_index.updates, args=(
                server.url, tokens["instance"], args.instances, args.prefix_rate, stop, state["sent"])))
        if args.proxies:
            loaders.append(multiprocessing.Process(target=heartbeats, args=(server.url, tokens["proxy"],
                                                                            args.proxies, stop)))
        for loader in loaders:
            loader.start()
        time.sleep(3)
        print(f"{deployment.vendor}, {server.label}, {args.instances} instances, {args.rate:g} snapshots/s "
              f"ingested{label}")
        body = json.dumps({"model": "meta-llama/Llama-3.1-70B-Instruct", "count": 3})
        if args.prefix:
            print(f"  with the prefix index: {args.prefix_keys} keys per instance, {args.prefix_rate:g} prefix "
                  f"updates/s; placement without a prompt, then with a {prefix_index.PROMPT_TOKENS}-token prompt "
                  f"(50 tenants in turn) as token ids, then as block keys, then without a prompt again")
        health, placed, answers = alternate(server.url, tokens["route"], args.samples, "/v1/placement", body)
        report("Proxy placement", health, placed)
        if args.prefix:
            for what, as_keys in (("token ids", False), ("block keys", True)):
                bodies = prefix_index.placement_bodies(args.instances, as_keys)
                health, placed, seen = alternate(server.url, tokens["route"], args.samples, "/v1/placement", bodies)
                report(f"Proxy placement, prompt as {what}", health, placed)
                hits = sorted({(a["prefix_source"], c["prefix_hit_blocks"]) for _, a in seen
                               for c in a["candidates"]})
                print(f"  (source, cached blocks) of the candidates seen: {hits}; each tenant's instances hold "
                      f"{prefix_index.expected_hits(args.instances, args.prefix_keys)} (blocks, of the prompt's)")
            if args.text:
                # Issue 43's targets for the chat: p50 ≤ 2.5×, p99 ≤ 4×; the cold text's is in process
                # (bench.text_prompts: the tokenizer's own encode + 0.5 ms), shown here through the server.
                for what, bodies, targets in (
                        ("a chat: a 4,000-token system prompt seen before, a new 100-token turn",
                         prefix_index.chat_bodies(args.instances), (2.5, 4)),
                        ("a cold 4,000-token text prompt", prefix_index.cold_text_bodies(args.samples + 50), None)):
                    health, placed, seen = alternate(server.url, tokens["route"], args.samples, "/v1/placement",
                                                     bodies)
                    report(f"Proxy placement, {what}", health, placed, *([targets] if targets else []))
                    errors = sorted({(a.get("prompt_error"), a.get("prompt_tokens") // 100 * 100) for _, a in seen})
                    print(f"  (prompt_error, prompt tokens to the hundred) seen: {errors}")
            # The first placement with a prompt starts the server's thread that follows the index: the same
            # placement without a prompt again, beside it, tells its share from the prompt's own.
            health, placed, _ = alternate(server.url, tokens["route"], args.samples, "/v1/placement", body)
            report("Proxy placement, no prompt again (the index followed beside it)", health, placed)
        verdicts = sorted({(status, answer["verdict"]) for status, answer in answers})
        ages = [c["signal_age_s"] for _, answer in answers for c in answer["candidates"][:1]]
        print(f"  answers seen: {verdicts}; first candidate's signal age p50 {statistics.median(ages):.3f} s "
              f"max {max(ages):.3f} s (ingest reaches each instance every {args.instances / args.rate:.0f} s)")
        if last:
            worst, median = freshness(server.url, tokens)
            print(f"  freshness: a report shows in placement after {median * 1000:.0f} ms (median), "
                  f"{worst * 1000:.0f} ms at worst of 20 (target: never more than 1 s behind)")
        if args.proxies:
            body = json.dumps({"model": "llama", "count": 3})
            health, placed, _ = alternate(server.url, tokens["route"], args.samples, "/v1/proxy/placement", body)
            report(f"Scheduler placement over {args.proxies} proxies", health, placed)
        stop.set()
        for loader in loaders:
            loader.join(10)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
