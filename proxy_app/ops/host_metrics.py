"""The per-instance and per-GPU gauges of the Proxy's ``/metrics``, from stored rows at scrape time.

The ingest path computes nothing for them: a scrape reads each alive
instance's columns and its stored snapshot's GPU rows. GPU series carry
DCGM exporter's identity labels, ``UUID`` and ``modelName``, beside
``instance_id`` and ``gpu`` (the index), so ``* on (UUID)`` joins them to
``DCGM_FI_DEV_*`` series (docs/prometheus.md). States are one gauge per
state (1 for the current one): admission per instance, health per GPU; a
throttle reason is a sample while it is active. A value the agent did not
report is no sample, never 0.
"""

from agent.gpu.health import THROTTLE_BITS
from controlplane.figures import finite, ratio

MIB = 2**20
MHZ = 1_000_000
MBIT = 1_000_000
ADMISSION_STATES = ("accepting", "degraded", "rejecting")
GPU_HEALTH = ("ok", "degraded", "error")
GPU_LABELS = ("instance_id", "gpu", "UUID", "modelName")
# The agent's names of NVML's clock-event bits; any other name a sender gives counts as "other",
# so the label's values stay bounded whoever reports.
THROTTLE_REASONS = frozenset(name for _, name in THROTTLE_BITS)


class HostFamilies:
    """Gauges of instances and their GPUs; ``make_gauge(name, documentation, labels)`` makes each family."""

    def __init__(self, make_gauge):
        def host(name, documentation, extra=()):
            return make_gauge("fleetwatch_instance_" + name, documentation, ["instance_id", *extra])

        def gpu(name, documentation, extra=()):
            return make_gauge("fleetwatch_gpu_" + name, documentation, [*GPU_LABELS, *extra])

        self.cpu = host("cpu_utilization_ratio", "Host CPU busy share, 0-1.")
        self.memory_used = host("memory_used_bytes", "Host memory in use (total - available).")
        self.memory_total = host("memory_total_bytes", "Host memory.")
        self.receive = host("network_receive_bits_per_second", "Bits received per second, all interfaces.")
        self.transmit = host("network_transmit_bits_per_second", "Bits sent per second, all interfaces.")
        self.admission = host("admission_state", "1 for the instance's own admission state, 0 for the others.",
                              ["state"])
        self.report_age = host("resource_report_age_seconds", "Seconds since the Proxy received its last snapshot.")
        self.gpu_util = gpu("utilization_ratio", "GPU utilisation over the agent's window, 0-1.")
        self.gpu_used = gpu("memory_used_bytes", "GPU frame-buffer memory in use.")
        self.gpu_total = gpu("memory_total_bytes", "GPU frame-buffer memory.")
        self.gpu_temp = gpu("temperature_celsius", "GPU core temperature.")
        self.power = gpu("power_watts", "GPU power draw.")
        self.power_limit = gpu("power_limit_watts", "GPU enforced power limit.")
        self.sm_clock = gpu("sm_clock_hertz", "GPU SM clock.")
        self.memory_clock = gpu("memory_clock_hertz", "GPU memory clock.")
        self.ecc = gpu("ecc_uncorrected_volatile_errors", "Uncorrected ECC errors since the driver was loaded.")
        self.xids = gpu("xid_errors", "Critical XIDs since the agent started (absent where NVML gives no XID events).")
        self.last_xid = gpu("last_xid", "The code of the newest critical XID since the agent started.")
        self.health = gpu("health", "1 for the GPU's health verdict (the agent's), 0 for the others.", ["health"])
        self.throttle = gpu("throttle_reason", "1 while this clock-event reason holds the GPU's clocks.", ["reason"])

    def add_instance(self, instance_id, columns, now):
        labels = [instance_id]
        _put(self.cpu, labels, ratio(columns["cpu_util"], 100))
        _put(self.memory_used, labels, _times(columns["memory_used_mb"], MIB))
        _put(self.memory_total, labels, _times(columns["memory_total_mb"], MIB))
        _put(self.receive, labels, _times(columns["network_rx_mbps"], MBIT))
        _put(self.transmit, labels, _times(columns["network_tx_mbps"], MBIT))
        if columns["admission_state"] in ADMISSION_STATES:
            for state in ADMISSION_STATES:
                self.admission.add_metric([instance_id, state], 1.0 if columns["admission_state"] == state else 0.0)
        reported_at = columns["resource_reported_at"]
        _put(self.report_age, labels, None if reported_at is None else max(0.0, now - reported_at))

    def add_gpu(self, instance_id, index, gpu):
        labels = [instance_id, index, _text(gpu.get("uuid")), _text(gpu.get("name"))]
        _put(self.gpu_util, labels, ratio(finite(gpu.get("utilization_pct")), 100))
        _put(self.gpu_used, labels, _times(finite(gpu.get("memory_used_mb")), MIB))
        _put(self.gpu_total, labels, _times(finite(gpu.get("memory_total_mb")), MIB))
        _put(self.gpu_temp, labels, finite(gpu.get("temperature_c")))
        _put(self.power, labels, finite(gpu.get("power_w")))
        _put(self.power_limit, labels, finite(gpu.get("power_limit_w")))
        _put(self.sm_clock, labels, _times(finite(gpu.get("sm_clock_mhz")), MHZ))
        _put(self.memory_clock, labels, _times(finite(gpu.get("mem_clock_mhz")), MHZ))
        _put(self.ecc, labels, finite(gpu.get("ecc_uncorrected_volatile")))
        _put(self.xids, labels, finite(gpu.get("xid_count")))
        _put(self.last_xid, labels, finite(gpu.get("xid_last")))
        if gpu.get("health") in GPU_HEALTH:
            for health in GPU_HEALTH:
                self.health.add_metric([*labels, health], 1.0 if gpu["health"] == health else 0.0)
        reasons = gpu.get("throttle_reasons")
        named = {reason if reason in THROTTLE_REASONS else "other" for reason in reasons
                 if isinstance(reason, str)} if isinstance(reasons, list) else ()
        for reason in sorted(named):
            self.throttle.add_metric([*labels, reason], 1.0)

    def families(self):
        return (self.cpu, self.memory_used, self.memory_total, self.receive, self.transmit, self.admission,
                self.report_age, self.gpu_util, self.gpu_used, self.gpu_total, self.gpu_temp, self.power,
                self.power_limit, self.sm_clock, self.memory_clock, self.ecc, self.xids, self.last_xid, self.health,
                self.throttle)


def _put(family, labels, value):
    if value is not None:
        family.add_metric(labels, value)


def _times(value, unit):
    return None if value is None else value * unit


def _text(value):
    return value[:128] if isinstance(value, str) else ""
