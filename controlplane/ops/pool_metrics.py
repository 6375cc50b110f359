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

ADMISSION_STATES = ("accepting", "degraded", "rejecting")
MBIT = 1_000_000


class PoolFamilies:
    """The gauges of pool summaries, named ``prefix + name``, each labelled with ``labels`` and then its own.

    ``make_gauge(name, documentation, labels)`` makes a family (the Proxy's adds its ``proxy_id``).
    """

    def __init__(self, prefix, make_gauge, labels=()):
        def gauge(name, documentation, extra=()):
            return make_gauge(prefix + name, documentation, [*labels, *extra])

        self.alive = gauge("instances_alive", "Alive instances (seen within their alive window or their TTL).")
        self.reporting = gauge("instances_reporting", "Alive instances with a resource report, by their own "
                               "admission state; with ..._missing_resource they add up to the alive instances.",
                               ["admission_state"])
        self.missing = gauge("instances_missing_resource", "Alive instances without a resource report.")
        self.admission = gauge("admission_state", "1 for the pool's admission state (SPEC 5), 0 for the others.",
                               ["state"])
        self.cpu = gauge("cpu_utilization_ratio", "Mean host CPU busy share of the reporting instances, 0-1.")
        self.memory = gauge("memory_used_ratio", "Host memory in use over host memory, summed over the pool, 0-1.")
        self.gpu = gauge("gpu_utilization_ratio", "Mean GPU utilisation of the reporting instances, 0-1.")
        self.gpu_memory = gauge("gpu_memory_used_ratio", "GPU memory in use over GPU memory, the pool's, 0-1.")
        self.receive = gauge("network_receive_bits_per_second", "Bits received per second, summed over the pool.")
        self.transmit = gauge("network_transmit_bits_per_second", "Bits sent per second, summed over the pool.")
        self.report_age = gauge("resource_report_age_max_seconds",
                                "Age of the oldest resource report among the reporting instances.")
        self.load = gauge("load_ratio", "In-flight requests over the pool's capacity.")

    def add(self, labels, summary):
        labels = list(labels)
        instances = _dict(summary, "instances")
        utilization = _dict(summary, "utilization")
        self._put(self.alive, labels, finite(instances.get("alive")))
        for state in ADMISSION_STATES:
            self._put(self.reporting, [*labels, state], finite(instances.get(state)))
        self._put(self.missing, labels, finite(instances.get("missing_resource")))
        if summary.get("pool_admission_state") in ADMISSION_STATES:
            for state in ADMISSION_STATES:
                self.admission.add_metric([*labels, state], 1.0 if summary["pool_admission_state"] == state else 0.0)
        self._put(self.cpu, labels, ratio(finite(utilization.get("cpu_avg")), 100))
        self._put(self.memory, labels, finite(utilization.get("memory_used_ratio")))
        self._put(self.gpu, labels, ratio(finite(utilization.get("gpu_util_avg")), 100))
        self._put(self.gpu_memory, labels, finite(utilization.get("gpu_mem_used_ratio")))
        self._put(self.receive, labels, _bits(finite(utilization.get("network_rx_mbps_total"))))
        self._put(self.transmit, labels, _bits(finite(utilization.get("network_tx_mbps_total"))))
        self._put(self.report_age, labels, finite(_dict(summary, "resource_freshness_s").get("max")))
        self._put(self.load, labels, finite(_dict(summary, "load").get("load_ratio")))

    @staticmethod
    def _put(family, labels, value):
        if value is not None:
            family.add_metric(labels, value)

    def families(self):
        return (self.alive, self.reporting, self.missing, self.admission, self.cpu, self.memory, self.gpu,
                self.gpu_memory, self.receive, self.transmit, self.report_age, self.load)


def _dict(summary, key):
    value = summary.get(key) if isinstance(summary, dict) else None
    return value if isinstance(value, dict) else {}


def _bits(mbps):
    return None if mbps is None else mbps * MBIT
