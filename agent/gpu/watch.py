"""The GPU monitor on a thread of its own, watched, so a hung NVML call cannot stall the sampler.

NVML calls block in the driver, and a GPU in trouble can keep one from
returning for minutes (what makes ``nvidia-smi`` hang). If the sampler made
those calls itself, snapshots would stop; if it went on with the rows it had,
a dead GPU would read ``ok``. So the monitor's rounds run on the
``fleetwatch-gpu`` thread, and each tick:

1. asks for a round when the thread is idle and waits for it at most
   ``slow_ms`` (a healthy round takes about a millisecond per GPU);
2. takes the round's rows when it finished in time;
3. otherwise, and on every later tick while the call still has not
   returned, reports every GPU with nothing known and health ``degraded``
   (``nvml_slow``): NVML's calls are serial, so no GPU is being read while
   one call hangs. No second round is asked for until the stuck one ends.

So a hang delays one snapshot by at most ``slow_ms`` and none after it. The
thread also opens NVML at start (bounded by ``open_timeout_s``), listens for
XID events through the monitor, and closes NVML when stopped.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class GpuSampler:
    """``sample()`` and ``status`` as the snapshot builder reads them, from a monitor on its own thread."""

    def __init__(self, monitor, slow_ms=2000):
        self.monitor = monitor
        self.slow_ms = slow_ms
        self._changed = threading.Condition()
        self._asked = threading.Event()
        self._stopping = False
        self._opened = threading.Event()
        self._busy = False
        self._rounds = 0
        self._rows = []
        self._stalled = False
        self._thread = None

    @property
    def status(self):
        return self.monitor.status

    @property
    def names(self):
        return self.monitor.names

    def start(self, open_timeout_s=30.0):
        """Start the thread and wait (bounded) until it has opened NVML."""
        self._thread = threading.Thread(target=self._run, name="fleetwatch-gpu", daemon=True)
        self._thread.start()
        if not self._opened.wait(open_timeout_s):
            log.warning("NVML did not open within %.0f s; GPUs are listed once it does", open_timeout_s)

    def stop(self, timeout_s=5.0):
        self._stopping = True
        self._asked.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def sample(self):
        with self._changed:
            if not self._busy and self._opened.is_set() and not self.monitor.needs_round():
                return []  # a host without GPUs (or NVML): nothing to hand to the thread
            stuck = self._busy
            if not stuck:
                self._busy = True
                wanted = self._rounds + 1
        if not stuck:
            self._asked.set()
            with self._changed:
                stuck = not self._changed.wait_for(lambda: self._rounds >= wanted, self.slow_ms / 1000.0)
        with self._changed:
            rows = self._rows
        if not stuck:
            if self._stalled:
                log.info("NVML answers again")
                self._stalled = False
            return rows
        if not self._stalled:
            self._stalled = True
            call = self.monitor.call_in_progress
            log.error("NVML call %s (GPU %s) has not returned in %d ms; reporting the GPUs as unknown",
                      call[1] if call else "?", call[0] if call else "?", self.slow_ms)
        return [self.monitor.stalled_entry(row) for row in rows]

    def _run(self):
        monitor = self.monitor
        try:
            monitor.open()
            monitor.listen_for_events()
        finally:
            self._opened.set()
        while True:
            self._asked.wait()
            self._asked.clear()
            if self._stopping:
                break
            try:
                rows = monitor.sample()
            except Exception:  # noqa: BLE001 - the thread must outlive any one round
                log.exception("GPU sampling failed")
                rows = self._rows
            with self._changed:
                self._rows = rows
                self._busy = False
                self._rounds += 1
                self._changed.notify_all()
        monitor.close()
