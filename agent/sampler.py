"""Host measurements through psutil: CPU, memory, network and disk.

``HostSampler`` keeps the previous counters so rates cover exactly the last
interval; the first sample has no interval behind it, so its rates are null
(SPEC 2.2), never 0. Counters and the clock come from injected objects so
every computation is testable with made-up numbers.
"""

from __future__ import annotations

import logging
import os
import time

import psutil

log = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * 1024 * 1024
# Interface speeds and the default route rarely change; reading them every
# second would cost an ioctl per interface and a /proc read for nothing.
SLOW_REFRESH_MS = 30_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def wall_ms() -> int:
    """Wall-clock epoch milliseconds, the unit of every time inside a snapshot."""
    return time.time_ns() // 1_000_000


# --- pure computations -------------------------------------------------------

def _busy_and_total(times):
    """Busy and total jiffies of one psutil ``cpu_times`` reading.

    Guest time is already counted inside user/nice on Linux, so it is taken
    out of the total; iowait is idle time (the CPU could run something else).
    """
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def _busy_pct(busy, total):
    if total <= 0:
        return None
    return round(min(100.0, max(0.0, 100.0 * busy / total)), 1)


def cpu_usage(previous_per_core, current_per_core):
    """``(total_pct, per_core_pct)`` from per-core readings; (None, None) when they do not pair up.

    The host total is busy time over elapsed time summed across cores, which
    is what the whole-host line of /proc/stat gives, without reading it twice.
    """
    if not previous_per_core or not current_per_core or len(previous_per_core) != len(current_per_core):
        return None, None
    busy_sum = total_sum = 0.0
    per_core = []
    for before, now in zip(previous_per_core, current_per_core):
        busy_before, total_before = _busy_and_total(before)
        busy_now, total_now = _busy_and_total(now)
        busy_sum += busy_now - busy_before
        total_sum += total_now - total_before
        # None for a core whose counters did not move (offline): it has no share.
        per_core.append(_busy_pct(busy_now - busy_before, total_now - total_before))
    total = _busy_pct(busy_sum, total_sum)
    if total is None:
        return None, None
    return total, per_core


def rate_mbps(previous_bytes, current_bytes, elapsed_ms):
    """Megabits per second between two byte counters; None for a first sample or a counter reset."""
    if previous_bytes is None or current_bytes is None or elapsed_ms <= 0 or current_bytes < previous_bytes:
        return None
    return round((current_bytes - previous_bytes) * 8 / (elapsed_ms * 1000.0), 3)


def default_route_interface(ipv4_routes: str | None, ipv6_routes: str | None = None):
    """Name of the interface carrying the default route, from /proc/net/route (and ipv6_route).

    Among several default routes the lowest metric wins, as the kernel does.
    """
    best = None
    for line in (ipv4_routes or "").splitlines()[1:]:
        parts = line.split()
        if len(parts) < 7:
            continue
        iface, destination, flags, metric = parts[0], parts[1], int(parts[3], 16), int(parts[6])
        if destination == "00000000" and flags & 0x1 and (best is None or metric < best[0]):
            best = (metric, iface)
    if best is not None:
        return best[1]
    for line in (ipv6_routes or "").splitlines():
        parts = line.split()
        if len(parts) < 10:
            continue
        destination, prefix, metric, iface = parts[0], parts[1], int(parts[5], 16), parts[9]
        if set(destination) == {"0"} and prefix == "00" and iface != "lo" and (best is None or metric < best[0]):
            best = (metric, iface)
    return best[1] if best else None


def order_interfaces(names, default_iface):
    """The default-route interface first, then the rest by name."""
    return sorted(names, key=lambda name: (name != default_iface, name))


# --- counter sources ---------------------------------------------------------

def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return None


class PsutilSource:
    """The real counters. Tests pass an object with the same methods instead."""

    def cpu_times_per_core(self):
        return psutil.cpu_times(percpu=True)

    def cpu_counts(self):
        return psutil.cpu_count(logical=True), psutil.cpu_count(logical=False)

    def load_average(self):
        try:
            return os.getloadavg()
        except (AttributeError, OSError):
            return None

    def virtual_memory(self):
        return psutil.virtual_memory()

    def swap_memory(self):
        return psutil.swap_memory()

    def net_io_counters(self):
        return psutil.net_io_counters(pernic=True)

    def net_if_stats(self):
        return psutil.net_if_stats()

    def default_route_interface(self):
        return default_route_interface(_read_text("/proc/net/route"), _read_text("/proc/net/ipv6_route"))

    def disk_usage(self, path):
        return psutil.disk_usage(path)


def _is_loopback(name, stats):
    if name == "lo" or name.startswith("lo:"):
        return True
    flags = getattr(stats, "flags", "") if stats is not None else ""
    return "loopback" in flags.split(",")


def _mb(value):
    return None if value is None else round(value / MIB, 1)


class HostSampler:
    """Host part of a snapshot (``devices`` minus GPUs), with rates over the last interval."""

    def __init__(self, source=None, clock_ms=monotonic_ms, mounts=("/",)):
        self._source = source or PsutilSource()
        self._clock_ms = clock_ms
        self._mounts = tuple(mounts)
        self._count_logical, self._count_physical = self._source.cpu_counts()
        self._previous_cpu = None
        self._previous_net = {}
        self._previous_at = None
        self._if_stats = {}
        self._default_iface = None
        self._slow_refreshed_at = None

    def sample(self) -> dict:
        now = self._clock_ms()
        elapsed = None if self._previous_at is None else now - self._previous_at
        self._refresh_slow_facts(now)
        devices = {
            "cpu": self._cpu(),
            "memory": self._memory(),
            "network": self._network(elapsed),
            "disk": self._disk(),
        }
        self._previous_at = now
        return devices

    def _refresh_slow_facts(self, now):
        if self._slow_refreshed_at is not None and now - self._slow_refreshed_at < SLOW_REFRESH_MS:
            return
        self._slow_refreshed_at = now
        try:
            self._if_stats = self._source.net_if_stats()
        except OSError as error:
            log.debug("interface stats unavailable: %s", error)
            self._if_stats = {}
        self._default_iface = self._source.default_route_interface()

    def _cpu(self):
        current = self._source.cpu_times_per_core()
        total, per_core = cpu_usage(self._previous_cpu, current)
        self._previous_cpu = current
        load = self._source.load_average()
        return {
            "utilization_pct": total,
            "load1": round(load[0], 2) if load else None,
            "load5": round(load[1], 2) if load else None,
            "load15": round(load[2], 2) if load else None,
            "per_core_pct": per_core,
            "count_logical": self._count_logical,
            "count_physical": self._count_physical,
        }

    def _memory(self):
        memory = self._source.virtual_memory()
        swap = self._source.swap_memory()
        return {
            # "free" is what a new process could get: available, not MemFree,
            # which hides reclaimable page cache.
            "used_mb": _mb(memory.total - memory.available),
            "total_mb": _mb(memory.total),
            "free_mb": _mb(memory.available),
            "swap_used_mb": _mb(swap.used),
            "swap_total_mb": _mb(swap.total),
        }

    def _network(self, elapsed_ms):
        counters = self._source.net_io_counters()
        names = [name for name in counters if not _is_loopback(name, self._if_stats.get(name))]
        entries, current = [], {}
        for name in order_interfaces(names, self._default_iface):
            io = counters[name]
            rx_before, tx_before = self._previous_net.get(name, (None, None))
            current[name] = (io.bytes_recv, io.bytes_sent)
            stats = self._if_stats.get(name)
            speed = getattr(stats, "speed", 0) if stats is not None else 0
            entries.append({
                "iface": name,
                "rx_mbps": rate_mbps(rx_before, io.bytes_recv, elapsed_ms or 0),
                "tx_mbps": rate_mbps(tx_before, io.bytes_sent, elapsed_ms or 0),
                # psutil reports 0 when the driver does not know the speed.
                "speed_mbps": int(speed) if speed and speed > 0 else None,
                "rx_bytes_total": io.bytes_recv,
                "tx_bytes_total": io.bytes_sent,
            })
        self._previous_net = current
        return entries

    def _disk(self):
        entries = []
        for mount in self._mounts:
            try:
                usage = self._source.disk_usage(mount)
            except OSError as error:
                log.debug("disk usage of %s unavailable: %s", mount, error)
                entries.append({"mount": mount, "used_gb": None, "total_gb": None})
                continue
            entries.append({
                "mount": mount,
                "used_gb": round(usage.used / GIB, 2),
                "total_gb": round(usage.total / GIB, 2),
            })
        return entries
