"""The load generator's own ceiling: the same producers against a no-op sink.

:func:`measure_ceiling` starts :mod:`.sink` in its own process, runs the
produce side of a spec against it for a few seconds at maximum rate, and
returns what the generator reached and how busy it and the sink were.
``driver`` is the producer driver module, as for :func:`.runner.run`. A
broker figure close to this ceiling means the generator, not the broker, was
the limit. If the sink itself ran near 100 % of a core, the figure is the
sink's limit and only a lower bound of the generator's (``sink_bound``).

Failure modes: a sink that does not come up within 30 s raises
``RuntimeError``; the sink process is always terminated.
"""
from __future__ import annotations

import multiprocessing
import queue as queue_mod
from dataclasses import replace

from . import sink
from .runner import DEFAULT_DRIVER, SATURATED_PERCENT, run
from .spec import WorkloadSpec


def measure_ceiling(spec: WorkloadSpec, seconds: float = 3.0, driver: str = DEFAULT_DRIVER) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    proc = ctx.Process(target=sink.serve, args=(ports,), name="perf-sink", daemon=True)
    proc.start()
    try:
        try:
            port = ports.get(timeout=30)
        except queue_mod.Empty:
            raise RuntimeError("the perf sink did not start within 30 s") from None
        probe = replace(spec, service_url=f"pulsar://127.0.0.1:{port}", duration=seconds, messages=0,
                        rate=0.0, stamp=False, topic=f"{spec.topic}-ceiling")
        result = run(probe, produce=True, consume=False, driver=driver, broker_pid=proc.pid, command="ceiling")
    finally:
        proc.terminate()
        proc.join(5)
    produced = result["produce"] or {}
    sink_cpu = (result["broker"] or {}).get("cpu_percent")
    return {
        "msg_per_s": produced.get("msg_per_s", 0.0),
        "mb_per_s": produced.get("mb_per_s", 0.0),
        "seconds": seconds,
        "driver": driver,
        "producer_workers": result["generator"]["producer_workers"],
        "producer_cpu_percent": result["generator"]["producer_cpu_percent"],
        "sink_cpu_percent": sink_cpu,
        "sink_bound": sink_cpu is not None and sink_cpu >= SATURATED_PERCENT,
        "errors": result["errors"],
    }
