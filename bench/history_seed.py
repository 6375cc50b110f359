"""A day of history for every instance of a pool, generated inside the database.

24 h of minute rollups and 15 min of full resolution per instance, the
pool's own series and one proxy's at the Scheduler (``pxy-bench``), written
with INSERT … SELECT from a generated series (recursive CTE on SQLite,
generate_series on PostgreSQL): 10,000 instances is 23 million rows.
Returns what each instance series takes on disk per instance, measured as
the database's growth while it was written.
"""

import time

SEED = r"""
import os, sys, time
import django
django.setup()
from django.db import connection, transaction
from proxy_app.models import Instance, InstanceMinute, InstanceSample, PoolResource, PoolResourceMinute
from scheduler_app.models import PoolResourceSample, Proxy, ProxyPoolMinute

N = int(sys.argv[1])
MINUTES, FULL_S = 24 * 60, 15 * 60
now = float(sys.argv[2])
start = (int(now) // 60) * 60 - 24 * 3600
pg = connection.vendor == "postgresql"
q = connection.ops.quote_name


def series(limit):
    if pg:
        return f"generate_series(0, {limit - 1}) AS k(k)"
    return f"(WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s WHERE k < {limit - 1}) SELECT k FROM s) AS k"


def stamp(expr):
    return f"to_timestamp({expr})" if pg else f"strftime('%Y-%m-%d %H:%M:%S', {expr}, 'unixepoch')"


def size():
    with connection.cursor() as cursor:
        if pg:
            cursor.execute("SELECT pg_database_size(current_database())")
            return cursor.fetchone()[0]
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA freelist_count")
        free = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return (pages - free) * cursor.fetchone()[0]


def figure(name, index):
    # Plausible, varying figures: a slow wave per instance, a few nulls.
    if name.endswith("ratio"):
        return f"(((k + {index}) % 97) / 100.0)"
    if name.startswith("network"):
        return f"(((k * 7 + {index}) % 1000) * 1.5)"
    return f"CASE WHEN (k + {index}) % 50 = 0 THEN NULL ELSE ((k * 3 + {index}) % 100) * 1.0 END"


def minute_columns(model, key_expr, index_expr):
    names, values = [], []
    if key_expr:
        names.append("instance_id" if model is InstanceMinute else "proxy_id")
        values.append(key_expr)
    names += ["minute", "samples"]
    values += [stamp(f"{start} + k * 60"), "60"]
    for i, name in enumerate(model.FIGURES):
        for agg in ("min", "avg", "max"):
            names.append(f"{name}_{agg}")
            values.append(figure(name, f"{index_expr} + {i}"))
    names.append(model.ADMISSION)
    values.append("CASE WHEN k % 17 = 0 THEN 'degraded' ELSE 'accepting' END")
    return names, values


def insert(model, names, values, source):
    sql = (f"INSERT INTO {q(model._meta.db_table)} ({', '.join(q(n) for n in names)}) "
           f"SELECT {', '.join(values)} FROM {source}")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)


results = []


def stage(label, rows, work):
    before = size()
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    results.append((label, rows, size() - before, seconds))


if not Instance.objects.exists():
    Instance.objects.bulk_create([Instance(instance_id=f"pool-{i}", host="10.9.0.1", port=1 + i % 65000,
                                           registered_at=now, last_seen_at=now) for i in range(N)], batch_size=2000)
instances = f"(SELECT {q('instance_id')} AS instance_id, ROW_NUMBER() OVER (ORDER BY {q('instance_id')}) AS n FROM {q(Instance._meta.db_table)} WHERE {q('instance_id')} LIKE 'pool-%') AS i"

names, values = minute_columns(InstanceMinute, "i.instance_id", "i.n")
stage("instance minute rollups (24 h)", N * MINUTES,
      lambda: insert(InstanceMinute, names, values, f"{instances} CROSS JOIN {series(MINUTES)}"))

sample_names = ["instance_id", "t", *InstanceSample.FIGURES, "admission_state"]
sample_values = ["i.instance_id", f"{now - FULL_S} + k", *(figure(n, "i.n") for n in InstanceSample.FIGURES), "'accepting'"]
stage("instance samples (15 min at 1 s)", N * FULL_S,
      lambda: insert(InstanceSample, sample_names, sample_values, f"{instances} CROSS JOIN {series(FULL_S)}"))

pool_names, pool_values = minute_columns(PoolResourceMinute, None, "1")
stage("pool minute rollups (24 h)", MINUTES, lambda: insert(PoolResourceMinute, pool_names, pool_values, series(MINUTES)))
point_names = ["t", *PoolResource.FIGURES, "pool_admission_state", "summary"]
point_values = [f"{now - FULL_S} + k", *(figure(n, 1) for n in PoolResource.FIGURES), "'accepting'", "'{}'"]
stage("pool resource rows (15 min at 1 s)", FULL_S,
      lambda: insert(PoolResource, point_names, point_values, series(FULL_S)))

Proxy.objects.update_or_create(proxy_id="pxy-bench", defaults=dict(host="10.0.0.1", port=8002, registered_at=now, last_seen_at=now))
proxy_names, proxy_values = minute_columns(ProxyPoolMinute, "'pxy-bench'", "1")
stage("scheduler minute rollups (24 h, one proxy)", MINUTES,
      lambda: insert(ProxyPoolMinute, proxy_names, proxy_values, series(MINUTES)))
sample_point_values = ["'pxy-bench'", *point_values]
stage("scheduler samples (15 min at 5 s, one proxy)", FULL_S // 5,
      lambda: insert(PoolResourceSample, ["proxy_id", *point_names],
                     [v.replace("+ k", "+ k * 5") for v in sample_point_values], series(FULL_S // 5)))

for label, rows, grown, seconds in results:
    print(f"SEED {label}|{rows}|{grown}|{seconds:.1f}")
"""


def seed_history(deployment, instances):
    """[(label, bytes per instance)] of the two instance series, after seeding the whole day."""
    out = deployment.python(SEED, instances, time.time())
    deployment.analyze()
    figures = []
    for line in out.splitlines():
        if line.startswith("SEED instance"):
            label, rows, grown, _ = line[5:].split("|")
            figures.append((label, int(grown) / instances))
    return figures
