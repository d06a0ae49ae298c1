"""``magnetar perf``: load generation and measurement for Pulsar-protocol brokers.

Layout (each module is small and has one job):

- :mod:`.spec`: what a run does (:class:`WorkloadSpec`) and how it is split
  over worker processes (:func:`plan_workers`).
- :mod:`.latency`: HDR histograms that travel between processes; percentiles
  and CDF points.
- :mod:`.payload`: message bodies that carry their send time (end-to-end latency).
- :mod:`.pacing`: a fixed-rate pacer that keeps its long-run average.
- :mod:`.procstat`: CPU and RSS of a process from ``/proc``.
- :mod:`.reporting`: the worker side of the report protocol.
- :mod:`.pulsar_driver`: producer and consumer workers on the official
  ``pulsar-client`` (C++ core).
- :mod:`.raw_driver`: producer workers that write whole batched entries
  themselves (``--driver raw``), built by :mod:`.raw_batch` with no
  per-message Python work; consumers stay on the official client.
- :mod:`.runner`: starts workers, aggregates their reports, prints progress,
  builds the result dict (saved with ``--json``).
- :mod:`.sink`: a no-op Pulsar-protocol server, to measure the load
  generator's own ceiling.
- :mod:`.cli`: the typer sub-app registered as ``magnetar perf``.

A *driver* is a module with ``produce(spec, plan, reporter, start, stop)``
and ``consume(...)`` functions; the runner only knows that contract, so
``bench/`` plugs a NATS JetStream driver into the same runner.
"""
