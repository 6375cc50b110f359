#!/usr/bin/env python
"""Where the time of a placement with a prompt goes (issue 32), in process: no web server, no network.

    .venv/bin/python -m bench.placement_profile [--instances 2000] [--prefix-keys 100] [--calls 300]
                                                [--database-url URL] [--cprofile]

The pool of ``bench/placement.py --prefix`` (instances each holding
``--prefix-keys`` keys of five tenants' 4,096-token prompts), then Django's
WSGI application called as ``up``'s hot lane calls it (``bench/profile.py``'s
``Wsgi``): ``/healthz``, placement without a prompt, with the prompt as token
ids and as block keys, and the parts of the token-id request alone (the
body's JSON as any body's and as placement reads it, its check, the SPEC 15.1 keys, the index lookup, the decision).
Last, what the copy of the index costs to follow: ``--follow`` prefix-block
bodies stored, then the copy brought up to date once (what a request found
due paid before the follower thread, and what the thread pays now). Every
figure is CPU time of this process per call, the median of five batches.
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import placement, prefix_index  # noqa: E402
from bench.common import PYTHON, Deployment  # noqa: E402
from bench.profile import Wsgi, cprofile_calls, line, per_call_ms, side_by_side  # noqa: E402

# Seeding 10,000 instances' keys takes longer than a TTL: seen and reported again once seeded.
FRESH = """
import time
import django
django.setup()
from proxy_app.models import Instance, InstanceResource
now = time.time()
Instance.objects.update(last_seen_at=now)
InstanceResource.objects.update(resource_reported_at=now)
"""


def inside(args):
    import django

    django.setup()
    import orjson

    from controlplane import clock
    from controlplane.api.parsers import parse_json_body
    from proxy_app.api.placement import decide, prompt_keys_of, request_of
    from proxy_app.api.serializers import PLACEMENT_BODY
    from proxy_app.api.token_ids import parse_placement_body
    from proxy_app.placement.candidates import BOARD
    from proxy_app.prefix.keeper import PREFIX

    route_token, instance_token = args.token.split()
    wsgi = Wsgi(route_token)
    ids = prefix_index.placement_bodies(args.instances, as_keys=False)
    keys = prefix_index.placement_bodies(args.instances, as_keys=True)
    plain = orjson.dumps({"model": prefix_index.MODEL, "count": 3})

    def place(bodies):
        return lambda i: wsgi.call("POST", "/v1/placement", bodies[i % len(bodies)].encode(), lane=True)

    started = time.perf_counter()
    place(ids)(0)  # builds the board and this process's copy of the index
    print(f"first placement with a prompt (board and index built): {time.perf_counter() - started:.2f} s; "
          f"{len(PREFIX.index):,} keys indexed")
    print(f"CPU per call, median of 5 batches of {args.calls}")
    healthz, none, as_ids, as_keys = side_by_side(
        [lambda i: wsgi.call("GET", "/healthz", token=False), lambda i: wsgi.call("POST", "/v1/placement", plain,
                                                                                  lane=True),
         place(ids), place(keys)], args.calls)
    line("GET /healthz through Django's WSGI handler", healthz)
    line("POST /v1/placement, no prompt, through the hot lane", none, f"{none / healthz:.2f}× /healthz")
    line("  the same, 4,096-token prompt as prompt_token_ids", as_ids, f"{as_ids / healthz:.2f}× /healthz")
    line("  the same prompt as prompt_block_keys (256 keys)", as_keys, f"{as_keys / healthz:.2f}× /healthz")
    raw = [body.encode() for body in ids]
    parsed = [parse_placement_body(body) for body in raw]
    checked = [PLACEMENT_BODY(data) for data in parsed]
    prompts = [prompt_keys_of(data) for data in checked]
    line("    the body's JSON as any body's (parse_json_body)", per_call_ms(lambda i: parse_json_body(raw[i % len(raw)]),
                                                                        args.calls))
    line("    the same as placement reads it (parse_placement_body)", per_call_ms(
        lambda i: parse_placement_body(raw[i % len(raw)]), args.calls))
    line("    PLACEMENT_BODY (the check, BodyChecks)", per_call_ms(lambda i: PLACEMENT_BODY(parsed[i % len(parsed)]),
                                                         args.calls))
    line("    the SPEC 15.1 keys (prompt_keys_of)", per_call_ms(lambda i: prompt_keys_of(checked[i % len(checked)]),
                                                             args.calls))
    line("    the index lookup (PREFIX.hits, 256 keys)", per_call_ms(
        lambda i: PREFIX.hits("events", prompts[i % len(prompts)], clock.now()), args.calls))
    line("    the decision with the lookup (decide)", per_call_ms(
        lambda i: decide(request_of(checked[i % len(checked)]), clock.now()), args.calls))
    line("    the decision without a prompt", per_call_ms(
        lambda i: BOARD.decide(request_of(orjson.loads(plain) | {"adapter": None, "prompt_tokens": None,
                                                                 "max_tokens": None, "session_key": None,
                                                                 "exclude": []}), clock.now()), args.calls))
    if args.cprofile:
        cprofile_calls(place(ids), args.calls, "placements with the prompt as token ids", rows=16)
    wsgi.token = instance_token
    follow(args, wsgi)


def follow(args, wsgi):
    """``--follow`` bodies stored through the lane, then the copy brought up to date: the CPU of one catch-up."""
    import orjson

    from controlplane import clock
    from proxy_app.prefix.keeper import PREFIX

    for n in range(args.follow):
        instance = f"bench-{n % args.instances}"
        wsgi.call("POST", "/v1/instance/prefix_blocks", orjson.dumps({
            "instance_id": instance, "engine": "e0", "epoch": 1, "seq": 1 + n // args.instances, "block_tokens": 16,
            "added": [(n * 8 + k) * 2654435761 % (2**62) for k in range(8)],
            "removed": [((n - args.instances) * 8 + k) * 2654435761 % (2**62) for k in range(8)]
            if n >= args.instances else []}), lane=True)
    started = time.process_time()
    PREFIX.refresh(clock.now())
    line(f"the copy following {args.follow} change rows at once", (time.process_time() - started) * 1000)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--prefix-keys", type=int, default=100)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--follow", type=int, default=500, help="prefix-block bodies the copy follows at once")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--token", help=argparse.SUPPRESS)  # set for the inner process
    args = parser.parse_args()
    if args.token:
        return inside(args)
    # One caller in a loop: the route gate would refuse it. No snapshots arrive here: the pool stays alive and its
    # signal fresh for the run (``FRESH``), so the decision ranks as it does under bench/placement.py's ingest.
    deployment = Deployment(args.database_url, roles="proxy,scheduler", FLEETWATCH_RATE_LIMIT=0,
                            FLEETWATCH_ROUTE_SHARE=1, FLEETWATCH_INSTANCE_TTL_S=3600,
                            FLEETWATCH_PLACEMENT_MAX_AGE_S=3600)
    try:
        deployment.python(placement.SEED, args.instances)
        print(deployment.python(prefix_index.SEED, args.instances, args.prefix_keys).strip(), flush=True)
        deployment.analyze()
        deployment.python(FRESH)
        token = deployment.token("route", "profile")
        instance = deployment.token("instance", "profile-instance")
        subprocess.run([PYTHON, "-m", "bench.placement_profile", "--token", f"{token} {instance}",
                        *(f"--{name}={value}" for name, value in (("instances", args.instances),
                                                                 ("calls", args.calls), ("follow", args.follow))),
                        *(["--cprofile"] if args.cprofile else [])], env=deployment.env, cwd=ROOT, check=True)
    finally:
        deployment.cleanup()


if __name__ == "__main__":
    main()
