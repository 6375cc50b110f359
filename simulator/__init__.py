"""The fleet simulator: synthetic GPU hosts reporting to a Proxy over its real HTTP API.

No Django here: the simulator is a client of the Proxy like any agent, and
builds on the agent's parts (its snapshot, capacity hint, GPU health,
backoff, and the capabilities and fingerprint of SPEC 3.2);
``manage.py simulate_fleet`` is only a Django door to its command line. The
parts:

- ``model``: the pure fleet model. Each host is a small state machine with
  its own random stream (seeded from the run's seed and the host's index);
  it builds ``resource_snapshot_v1`` bodies as the agent sends them, with
  figures that drift smoothly, GPU faults, stale spells and restarts.
  No network, no clock: callers pass the wall time in.
- ``gpus``: one simulated board of a host (utilisation window, memory,
  temperature, power, faults), used by ``model``.
- ``engines``: a host's vLLM server as a queue model (arrivals, a bounded
  batch, KV cache, preemption, faults), read into SPEC 13's ``engines``
  objects by the agent's own ``EngineTracker``; used by ``model``.
- ``stats``: what the run saw (counts by request and outcome, latency
  histograms), mergeable across processes, and the summary made of it.
- ``driver``: one asyncio event loop driving a share of the fleet through
  aiohttp with a bounded keep-alive connection pool, each host's report
  slots spread evenly over the interval.
- ``processes``: the whole run, in this process or split over several.
- ``workload``, ``routing``, ``routing_run``: the routing benchmark
  (``--routing-benchmark``): a seeded fleet and request stream with its
  faults, the client-side policies and the placement client, and the run
  that routes the stream by each policy in turn, the engines serving it;
  ``prompts`` and ``prompt_forms`` its prompts, as keys, token ids, text
  or chats (``--prompt-form``).
- ``display``: the live progress view and the final summary table (rich).
- ``cli``: the options, the run they make and the summary printed.

``docs/simulator.md`` is the operator's view.
"""
