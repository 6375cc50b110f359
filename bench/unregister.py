"""1,000 unregisters at once, as a fleet leaving together sends them (the soak's end, issue 23).

    .venv/bin/python bench/unregister.py URL TOKEN [--count 1000] [--connections 64]

Registers ``count`` instances, each with one stored snapshot (its resource
and snapshot rows), then sends every unregister at once over
``connections`` connections (aiohttp) and answers each one's latency at that many in flight (from sending it to
its answer), and the time they all took.
``bench/run.py`` calls ``mass_unregister`` on its pool of 10,000.
"""

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import snapshot_body_template  # noqa: E402


async def _unregister_all(url, token, ids, connections):
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections), headers=headers) as session:
        template = snapshot_body_template(1)
        for instance_id in ids:  # one by one: the setup, not the figure
            register = {"instance_id": instance_id, "host": "10.0.0.1", "port": 8000}
            async with session.post(url + "/v1/instance/register", json=register) as response:
                response.raise_for_status()
            body = template.replace("__ID__", instance_id).replace("__SEQ__", "1")
            async with session.post(url + "/v1/instance/resource_snapshot", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                response.raise_for_status()

        in_flight = asyncio.Semaphore(connections)

        async def one(instance_id):
            async with in_flight:  # timed from the moment it has its connection, as the soak's client did
                return await _timed(instance_id)

        async def _timed(instance_id):
            start = time.perf_counter()
            async with session.post(url + "/v1/instance/unregister", json={"instance_id": instance_id}) as response:
                answer = await response.read()
                if response.status != 200 or not json.loads(answer)["ok"]:
                    raise RuntimeError(f"unregister {instance_id}: {response.status} {answer[:200]!r}")
            return time.perf_counter() - start

        started = time.perf_counter()
        latencies = await asyncio.gather(*(one(instance_id) for instance_id in ids))
        return latencies, time.perf_counter() - started


def mass_unregister(url, token, count=1000, connections=64, prefix="leaving-"):
    """{"p50_ms", "p99_ms", "total_s"} of ``count`` unregisters sent at once."""
    ids = [f"{prefix}{i}" for i in range(count)]
    latencies, total = asyncio.run(_unregister_all(url, token, ids, connections))
    ordered = sorted(latencies)
    return {"p50_ms": statistics.median(ordered) * 1000, "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000,
            "total_s": total}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url")
    parser.add_argument("token", help="an instance-scope token")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    print(mass_unregister(args.url.rstrip("/"), args.token, args.count, args.connections))


if __name__ == "__main__":
    main()
