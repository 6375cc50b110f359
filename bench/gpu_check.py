"""Does the agent read a real NVIDIA GPU right? Run on a GPU host; compares with ``nvidia-smi``.

The unit tests drive ``agent/gpu/monitor.py`` through a fake NVML module; this
script is the check that the real path agrees with the device. It needs
only what the agent needs (psutil, requests, nvidia-ml-py) and
``nvidia-smi``; with PyTorch installed it also loads the GPUs for the middle
third of the run, so utilisation, power and clocks are seen moving.

1. ``python -m agent --once --no-report``: every GPU field of SPEC 2.2 is
   present; each reading is filled exactly where ``nvidia-smi`` has a value
   and null where it says N/A; identity, memory, power limit, temperature
   and ECC agree with ``nvidia-smi`` read just after.
2. SPEC 13's hardware events, through nvidia-ml-py itself: an event set is
   created, every GPU reports critical-XID events as supported and takes the
   registration, a wait with nothing to report raises ``NVMLError_Timeout``
   (the path the agent's listener runs on), the set is freed; row remapping
   reads on every GPU (or ``NotSupported`` before Ampere), and the agent's
   ``remapped_rows_*``, ``xid_count`` and ``xid_last`` agree. An XID cannot
   be provoked on purpose, so the delivery of one is only unit-tested.
3. ``python -m agent --no-report`` for ``--seconds``, its
   ``/v1/resource/snapshot`` polled once a second: the rolling window fills
   (sample count, newest-sample time within two intervals of now), and
   under load utilisation and power rise.

Writes ``once.json`` (the first snapshot), ``snapshot.json`` (one taken
under load), ``series.jsonl`` (each poll's GPU rows next to ``nvidia-smi``'s
reading) and ``nvidia-smi-q.txt`` into ``--out``, and prints one line per
check; exit status 1 when any check fails.

    python bench/gpu_check.py --seconds 30 --out /tmp/gpu-check
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pynvml
import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.gpu.monitor import HARDWARE_EVENT_FIELDS, decode_throttle_reasons  # noqa: E402

GPU_FIELDS = (
    "index", "uuid", "name", "utilization_pct", "utilization_pct_current", "utilization_pct_avg",
    "utilization_pct_max", "utilization_sample_count", "utilization_window_ms", "utilization_sample_ok",
    "utilization_source", "utilization_sample_timestamp_ms", "utilization_sample_quality", "utilization_raw_value",
    "utilization_error", "memory_used_mb", "memory_total_mb", "memory_free_mb", "temperature_c", "power_w",
    "health", "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "ecc_uncorrected_volatile", "throttle_reasons",
    "health_reasons",
)
# The agent's field and the nvidia-smi query property that reads the same thing.
SMI_PROPERTIES = {
    "index": "index", "uuid": "uuid", "name": "name", "utilization_pct_current": "utilization.gpu",
    "memory_used_mb": "memory.used", "memory_total_mb": "memory.total", "memory_free_mb": "memory.free",
    "temperature_c": "temperature.gpu", "power_w": "power.draw", "power_limit_w": "enforced.power.limit",
    "sm_clock_mhz": "clocks.sm", "mem_clock_mhz": "clocks.mem",
    "ecc_uncorrected_volatile": "ecc.errors.uncorrected.volatile.total",
    "throttle_reasons": "clocks_event_reasons.active",
}
# How far a reading may drift between the agent's read and nvidia-smi's.
TOLERANCE = {"memory_total_mb": 1.0, "power_limit_w": 1.0, "temperature_c": 5.0, "ecc_uncorrected_volatile": 0}
NOT_AVAILABLE = ("N/A", "[N/A]", "[Not Supported]", "Not Supported", "")


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what, detail=""):
        self.failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  {what}" + (f"  ({detail})" if detail else ""), flush=True)


def smi_properties():
    """The query properties this nvidia-smi knows (an unknown one fails the whole query)."""
    known = []
    for prop in SMI_PROPERTIES.values():
        done = subprocess.run(["nvidia-smi", f"--query-gpu={prop}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True)
        if done.returncode == 0:
            known.append(prop)
        else:
            print(f"note  nvidia-smi does not know {prop}: {done.stdout.strip() or done.stderr.strip()}")
    return known


def smi_read(properties):
    """One row per GPU: {property: text or None where nvidia-smi has no value}."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(properties)}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return [{prop: (None if value.strip() in NOT_AVAILABLE else value.strip()) for prop, value in zip(properties, row)}
            for row in csv.reader(io.StringIO(out), skipinitialspace=True)]


def agrees(field, ours, theirs):
    """Whether the agent's value and nvidia-smi's text say the same, within the field's tolerance."""
    if field == "throttle_reasons":
        return sorted(ours) == sorted(decode_throttle_reasons(int(theirs, 16)))
    if field in ("uuid", "name"):
        return ours == theirs
    return abs(float(ours) - float(theirs)) <= TOLERANCE.get(field, float("inf"))


def compare(checks, label, gpus, smi, properties):
    for gpu, row in zip(gpus, smi):
        missing = [f for f in GPU_FIELDS if f not in gpu]
        checks.check(not missing, f"{label} GPU {gpu['index']}: every SPEC 2.2 field present", ", ".join(missing))
        missing = [f for f in HARDWARE_EVENT_FIELDS if f not in gpu]
        checks.check(not missing, f"{label} GPU {gpu['index']}: every SPEC 13 hardware-event field present",
                     ", ".join(missing))
        for field, prop in SMI_PROPERTIES.items():
            if prop not in properties:
                continue
            ours, theirs = gpu.get(field), row[prop]
            if (ours is None) != (theirs is None):
                checks.check(False, f"{label} GPU {gpu['index']} {field}: null exactly where nvidia-smi has none",
                             f"agent {ours!r}, nvidia-smi {theirs!r}")
            elif ours is not None and (field in TOLERANCE or field in ("uuid", "name", "throttle_reasons")):
                checks.check(agrees(field, ours, theirs), f"{label} GPU {gpu['index']} {field} agrees",
                             f"agent {ours!r}, nvidia-smi {theirs!r}")


def event_checks(checks, nvml):
    """The NVML event API as the agent's XID listener uses it, on every GPU; NVML must be initialised."""
    try:
        event_set = nvml.nvmlEventSetCreate()
    except nvml.NVMLError as error:
        checks.check(False, "NVML creates an event set", str(error))
        return {}
    checks.check(True, "NVML creates an event set")
    registered = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
        checks.check(bool(supported & nvml.nvmlEventTypeXidCriticalError),
                     f"GPU {index}: critical XID events supported", f"event types {supported:#x}")
        try:
            nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
            registered[index] = True
        except nvml.NVMLError as error:
            registered[index] = False
            checks.check(False, f"GPU {index}: registers for critical XID events", str(error))
            continue
        checks.check(True, f"GPU {index}: registers for critical XID events")
    try:
        data = nvml.nvmlEventSetWait_v2(event_set, 200)
        checks.check(False, "a wait with no event times out with NVMLError_Timeout",
                     f"an event came: type {data.eventType:#x}, data {data.eventData} (a real XID? see dmesg)")
    except nvml.NVMLError_Timeout:
        checks.check(True, "a wait with no event times out with NVMLError_Timeout")
    except nvml.NVMLError as error:
        checks.check(False, "a wait with no event times out with NVMLError_Timeout", repr(error))
    try:
        nvml.nvmlEventSetFree(event_set)
        checks.check(True, "NVML frees the event set")
    except nvml.NVMLError as error:
        checks.check(False, "NVML frees the event set", str(error))
    return registered


def hardware_event_checks(checks, nvml, gpus):
    """The agent's SPEC 13 GPU fields against what nvidia-ml-py reads directly (``gpus``: its rows)."""
    nvml.nvmlInit()
    try:
        registered = event_checks(checks, nvml)
        for gpu in gpus:
            index = gpu["index"]
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            try:
                _, _, pending, failure = nvml.nvmlDeviceGetRemappedRows(handle)
                expected = (bool(pending), bool(failure))
            except nvml.NVMLError_NotSupported:
                expected = (None, None)
            ours = (gpu["remapped_rows_pending"], gpu["remapped_rows_failure"])
            checks.check(ours == expected, f"GPU {index}: remapped_rows_pending/_failure agree with NVML",
                         f"agent {ours}, NVML {expected}")
            listening = registered.get(index, False)
            checks.check((gpu["xid_count"] is not None) == listening and gpu["xid_last"] is None
                         and gpu["xid_count"] in (0, None),
                         f"GPU {index}: xid_count {'0' if listening else 'null'}, no XID since the agent started",
                         f"xid_count {gpu['xid_count']}, xid_last {gpu['xid_last']}")
            checks.check("nvml_slow" not in gpu["health_reasons"], f"GPU {index}: no NVML call took too long",
                         ", ".join(gpu["health_reasons"]))
    finally:
        nvml.nvmlShutdown()


def smi_remapped_rows_note():
    """What nvidia-smi says about row remapping, printed for the record (its CSV format varies by driver)."""
    done = subprocess.run(["nvidia-smi", "--query-remapped-rows=gpu_uuid,remapped_rows.pending,remapped_rows.failure",
                           "--format=csv,noheader"], capture_output=True, text=True)
    print(f"note  nvidia-smi --query-remapped-rows: {(done.stdout or done.stderr).strip()!r}")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_load(seconds):
    """Matrix products on every GPU for ``seconds`` (PyTorch); None where PyTorch is missing."""
    code = ("import sys, time, torch\n"
            "xs = [torch.randn(8192, 8192, device=f'cuda:{i}', dtype=torch.bfloat16)"
            " for i in range(torch.cuda.device_count())]\n"
            "end = time.time() + float(sys.argv[1])\n"
            "while time.time() < end:\n"
            "    for x in xs: x @ x\n"
            "    torch.cuda.synchronize()\n")
    try:
        import torch  # noqa: F401
    except ImportError:
        print("note  PyTorch is not installed: no load phase")
        return None
    return subprocess.Popen([sys.executable, "-c", code, str(seconds)])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--out", type=Path, default=Path("gpu-check"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    checks = Checks()

    print(f"note  nvidia-ml-py {metadata.version('nvidia-ml-py')}, psutil {metadata.version('psutil')}, "
          f"Python {sys.version.split()[0]}")
    (args.out / "nvidia-smi-q.txt").write_text(subprocess.run(["nvidia-smi", "-q"], capture_output=True,
                                                              text=True).stdout)
    properties = smi_properties()

    started = time.monotonic()
    once = subprocess.run([sys.executable, "-m", "agent", "--once", "--no-report"], cwd=ROOT, capture_output=True,
                          text=True)
    smi = smi_read(properties)
    checks.check(once.returncode == 0, "agent --once --no-report exits 0", once.stderr.strip()[-300:])
    snapshot = json.loads(once.stdout)
    (args.out / "once.json").write_text(json.dumps(snapshot, indent=1))
    gpus = snapshot["devices"]["gpu"]
    print(f"note  --once took {time.monotonic() - started:.1f} s; gpu_status {snapshot.get('gpu_status')!r}")
    checks.check(snapshot.get("gpu_status") == "ok" and len(gpus) == len(smi) > 0,
                 "gpu_status ok, one row per GPU nvidia-smi lists", f"{len(gpus)} rows, {len(smi)} GPUs")
    compare(checks, "--once", gpus, smi, properties)
    smi_remapped_rows_note()
    hardware_event_checks(checks, pynvml, gpus)

    port = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "agent", "--no-report", "--listen", f"127.0.0.1:{port}",
                              "--sample-interval-ms", "1000"], cwd=ROOT)
    load = None
    series = []
    try:
        for second in range(args.seconds):
            if second == args.seconds // 3:
                load = start_load(args.seconds // 3)
            time.sleep(1)
            try:
                answer = requests.get(f"http://127.0.0.1:{port}/v1/resource/snapshot", timeout=5)
            except requests.ConnectionError:
                continue  # still starting
            if answer.status_code != 200:
                continue
            taken = answer.json()
            series.append({"second": second, "loaded": load is not None and load.poll() is None,
                           "wall_ms": int(time.time() * 1000), "gpus": taken["devices"]["gpu"],
                           "smi": smi_read(properties), "snapshot": taken})
    finally:
        agent.terminate()
        agent.wait(10)
        if load is not None:
            load.wait(60)
    with open(args.out / "series.jsonl", "w") as out:
        for poll in series:
            out.write(json.dumps({k: v for k, v in poll.items() if k != "snapshot"}) + "\n")

    checks.check(len(series) >= args.seconds - 5, "the agent served snapshots every second",
                 f"{len(series)} of {args.seconds}")
    if series:
        last = series[-1]
        compare(checks, "last poll", last["gpus"], last["smi"], properties)
        for gpu in last["gpus"]:
            window = gpu["utilization_window_ms"] // 1000
            checks.check(window - 1 <= gpu["utilization_sample_count"] <= window + 1,
                         f"GPU {gpu['index']}: the {window} s window holds about one sample a second",
                         f"{gpu['utilization_sample_count']} samples")
            lag = last["wall_ms"] - gpu["utilization_sample_timestamp_ms"]
            checks.check(0 <= lag <= 2500, f"GPU {gpu['index']}: newest sample within two intervals", f"{lag} ms")
    loaded = [poll for poll in series if poll["loaded"]]
    idle = [poll for poll in series if not poll["loaded"]]
    if loaded and idle:
        (args.out / "snapshot.json").write_text(json.dumps(loaded[-1]["snapshot"], indent=1))
        for index in range(len(loaded[0]["gpus"])):
            busy = max(poll["gpus"][index]["utilization_pct_max"] or 0 for poll in loaded)
            power_idle = min(poll["gpus"][index]["power_w"] or 0 for poll in idle)
            power_busy = max(poll["gpus"][index]["power_w"] or 0 for poll in loaded)
            checks.check(busy >= 50, f"GPU {index}: utilisation rises under load", f"max {busy} %")
            checks.check(power_busy > power_idle, f"GPU {index}: power rises under load",
                         f"{power_idle} W idle, {power_busy} W loaded")
    print(f"{'all checks passed' if not checks.failed else f'{checks.failed} checks failed'}")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
