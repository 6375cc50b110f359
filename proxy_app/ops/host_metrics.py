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
from controlplane.ops.gauges import MBIT, Gauge, GaugeTable, one_of, times

MIB = 2**20
MHZ = 1_000_000
ADMISSION_STATES = ("accepting", "degraded", "rejecting")
GPU_HEALTH = ("ok", "degraded", "error")
GPU_LABELS = ("instance_id", "gpu", "UUID", "modelName")
# The agent's names of NVML's clock-event bits; any other name a sender gives counts as "other",
# so the label's values stay bounded whoever reports.
THROTTLE_REASONS = frozenset(name for _, name in THROTTLE_BITS)


def _reported_age(columns, now):
    reported_at = columns["resource_reported_at"]
    return None if reported_at is None else max(0.0, now - reported_at)


# Read from an instance's resource columns and the scrape's now.
INSTANCE_GAUGES = (
    Gauge("cpu_utilization_ratio", "Host CPU busy share, 0-1.", lambda columns, now: ratio(columns["cpu_util"], 100)),
    Gauge("memory_used_bytes", "Host memory in use (total - available).",
          lambda columns, now: times(columns["memory_used_mb"], MIB)),
    Gauge("memory_total_bytes", "Host memory.", lambda columns, now: times(columns["memory_total_mb"], MIB)),
    Gauge("network_receive_bits_per_second", "Bits received per second, all interfaces.",
          lambda columns, now: times(columns["network_rx_mbps"], MBIT)),
    Gauge("network_transmit_bits_per_second", "Bits sent per second, all interfaces.",
          lambda columns, now: times(columns["network_tx_mbps"], MBIT)),
    Gauge("admission_state", "1 for the instance's own admission state, 0 for the others.",
          lambda columns, now: one_of(columns["admission_state"], ADMISSION_STATES), "state"),
    Gauge("resource_report_age_seconds", "Seconds since the Proxy received its last snapshot.", _reported_age),
)


def _gpu_figure(key, unit=None):
    """A finite figure of the GPU row, in ``unit``s when given."""
    if unit is None:
        return lambda gpu: finite(gpu.get(key))
    return lambda gpu: times(finite(gpu.get(key)), unit)


def _throttle_reasons(gpu):
    reasons = gpu.get("throttle_reasons")
    named = {reason if reason in THROTTLE_REASONS else "other" for reason in reasons
             if isinstance(reason, str)} if isinstance(reasons, list) else ()
    return {reason: 1.0 for reason in sorted(named)}


# Read from a GPU row of an instance's stored snapshot.
GPU_GAUGES = (
    Gauge("utilization_ratio", "GPU utilisation over the agent's window, 0-1.",
          lambda gpu: ratio(finite(gpu.get("utilization_pct")), 100)),
    Gauge("memory_used_bytes", "GPU frame-buffer memory in use.", _gpu_figure("memory_used_mb", MIB)),
    Gauge("memory_total_bytes", "GPU frame-buffer memory.", _gpu_figure("memory_total_mb", MIB)),
    Gauge("temperature_celsius", "GPU core temperature.", _gpu_figure("temperature_c")),
    Gauge("power_watts", "GPU power draw.", _gpu_figure("power_w")),
    Gauge("power_limit_watts", "GPU enforced power limit.", _gpu_figure("power_limit_w")),
    Gauge("sm_clock_hertz", "GPU SM clock.", _gpu_figure("sm_clock_mhz", MHZ)),
    Gauge("memory_clock_hertz", "GPU memory clock.", _gpu_figure("mem_clock_mhz", MHZ)),
    Gauge("ecc_uncorrected_volatile_errors", "Uncorrected ECC errors since the driver was loaded.",
          _gpu_figure("ecc_uncorrected_volatile")),
    Gauge("xid_errors", "Critical XIDs since the agent started (absent where NVML gives no XID events).",
          _gpu_figure("xid_count")),
    Gauge("last_xid", "The code of the newest critical XID since the agent started.", _gpu_figure("xid_last")),
    Gauge("health", "1 for the GPU's health verdict (the agent's), 0 for the others.",
          lambda gpu: one_of(gpu.get("health"), GPU_HEALTH), "health"),
    Gauge("throttle_reason", "1 while this clock-event reason holds the GPU's clocks.", _throttle_reasons, "reason"),
)


class HostFamilies:
    """Gauges of instances and their GPUs; ``make_gauge(name, documentation, labels)`` makes each family."""

    def __init__(self, make_gauge):
        self._instances = GaugeTable(make_gauge, "fleetwatch_instance_", ["instance_id"], INSTANCE_GAUGES)
        self._gpus = GaugeTable(make_gauge, "fleetwatch_gpu_", GPU_LABELS, GPU_GAUGES)

    def add_instance(self, instance_id, columns, now):
        self._instances.add([instance_id], columns, now)

    def add_gpu(self, instance_id, index, gpu):
        self._gpus.add([instance_id, index, _text(gpu.get("uuid")), _text(gpu.get("name"))], gpu)

    def families(self):
        return (*self._instances.families(), *self._gpus.families())


def _text(value):
    return value[:128] if isinstance(value, str) else ""
