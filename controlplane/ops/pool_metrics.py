"""A pool_resource (SPEC 5) as Prometheus gauges: the Proxy's of its own pool, the Scheduler's of every pool.

The families do not overlap, so a ``sum()`` means something: the alive
instances are those reporting (by their own admission state) plus those
missing a resource report. (``fleetwatch_pool_instances{state}``, kept for
the dashboards that read it, mixes overlapping sets under one label.) The
pool's admission state is one gauge per state, 1 for the current one.
Ratios are 0-1, rates bits per second; a figure the summary does not have
is no sample.
"""

from controlplane.figures import finite, ratio
from controlplane.ops.gauges import MBIT, Gauge, GaugeTable, one_of, times

ADMISSION_STATES = ("accepting", "degraded", "rejecting")


def _section(summary, key):
    value = summary.get(key) if isinstance(summary, dict) else None
    return value if isinstance(value, dict) else {}


def _figure(key, name):
    """A figure of the summary's ``key`` section, finite or None."""
    return lambda summary: finite(_section(summary, key).get(name))


POOL_GAUGES = (
    Gauge("instances_alive", "Alive instances (seen within their alive window or their TTL).",
          _figure("instances", "alive")),
    Gauge("instances_reporting", "Alive instances with a resource report, by their own admission state; with "
          "..._missing_resource they add up to the alive instances.",
          lambda summary: {state: _figure("instances", state)(summary) for state in ADMISSION_STATES},
          "admission_state"),
    Gauge("instances_missing_resource", "Alive instances without a resource report.",
          _figure("instances", "missing_resource")),
    Gauge("admission_state", "1 for the pool's admission state (SPEC 5), 0 for the others.",
          lambda summary: one_of(summary.get("pool_admission_state"), ADMISSION_STATES), "state"),
    Gauge("cpu_utilization_ratio", "Mean host CPU busy share of the reporting instances, 0-1.",
          lambda summary: ratio(_figure("utilization", "cpu_avg")(summary), 100)),
    Gauge("memory_used_ratio", "Host memory in use over host memory, summed over the pool, 0-1.",
          _figure("utilization", "memory_used_ratio")),
    Gauge("gpu_utilization_ratio", "Mean GPU utilisation of the reporting instances, 0-1.",
          lambda summary: ratio(_figure("utilization", "gpu_util_avg")(summary), 100)),
    Gauge("gpu_memory_used_ratio", "GPU memory in use over GPU memory, the pool's, 0-1.",
          _figure("utilization", "gpu_mem_used_ratio")),
    Gauge("network_receive_bits_per_second", "Bits received per second, summed over the pool.",
          lambda summary: times(_figure("utilization", "network_rx_mbps_total")(summary), MBIT)),
    Gauge("network_transmit_bits_per_second", "Bits sent per second, summed over the pool.",
          lambda summary: times(_figure("utilization", "network_tx_mbps_total")(summary), MBIT)),
    Gauge("resource_report_age_max_seconds", "Age of the oldest resource report among the reporting instances.",
          _figure("resource_freshness_s", "max")),
    Gauge("load_ratio", "In-flight requests over the pool's capacity.", _figure("load", "load_ratio")),
)


class PoolFamilies(GaugeTable):
    """The gauges of pool summaries, named ``prefix + name``, each labelled with ``labels`` and then its own.

    ``make_gauge(name, documentation, labels)`` makes a family (the Proxy's adds its ``proxy_id``);
    ``add(labels, summary)`` adds one pool's samples.
    """

    def __init__(self, prefix, make_gauge, labels=()):
        super().__init__(make_gauge, prefix, labels, POOL_GAUGES)
