"""NATS JetStream workers for the ``magnetar.perf`` runner (bench only).

Same contract as :mod:`magnetar.perf.pulsar_driver`: ``produce`` and
``consume`` run in a spawned worker process, call ``reporter.ready()`` once
set up, wait for ``start``, and report through the :class:`Reporter`.

Mapping of the spec onto JetStream (streams are created by the bench before
the run, one per topic, file storage; see ``nats_server.py``):

- topic -> subject of the same name, captured by its stream;
- producer -> ``nats-py`` core publishes with a per-message reply subject
  ``<inbox>.<n>``: JetStream answers each one with a PubAck. This is what
  ``js.publish_async`` does, minus its per-message future, token and JSON
  parse, which would make the client, not the server, the bottleneck. Up to
  ``max_pending`` publishes are in flight (the NATS analogue of the Pulsar
  producer queue); JetStream has no client-side batching, every message is
  stored and acknowledged on its own;
- subscription -> a durable push consumer (AckAll, acknowledged every 1000
  messages or 50 ms: the analogue of Pulsar's cumulative ack).

Failure modes: a PubAck carrying an error counts as an error; a worker that
cannot connect ends with the exception in its final report.
"""
from __future__ import annotations

import asyncio
import random
import re
import time

from magnetar.perf.pacing import Pacer
from magnetar.perf.payload import Stamper, filler, stamp_of
from magnetar.perf.reporting import Reporter
from magnetar.perf.spec import WorkerPlan, WorkloadSpec


def stream_name(topic: str) -> str:
    return "S_" + re.sub(r"[^A-Za-z0-9_-]", "_", topic)


def durable_name(subscription: str, topic: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{subscription}-{topic}")


def _gap(k: int) -> int:
    return 1 if k <= 1 else random.randint(1, 2 * k - 1)


def _run(coro_fn, *args) -> None:
    try:
        import uvloop
        uvloop.run(coro_fn(*args))
    except ImportError:  # pragma: no cover
        asyncio.run(coro_fn(*args))


async def _wait_event(event) -> None:
    """Wait for a multiprocessing event without blocking the loop."""
    while not event.wait(0):
        await asyncio.sleep(0.005)


def produce(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    _run(_produce, spec, plan, reporter, start, stop)


async def _produce(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    import nats

    nc = await nats.connect(spec.service_url, pending_size=8 * 1024 * 1024, max_reconnect_attempts=0)
    inbox = nc.new_inbox()
    prefix_len = len(inbox) + 1
    size = spec.size
    sample_every = plan.sample_every
    sent_at: dict[int, int] = {}
    state = {"acked": 0, "pending_acks": 0}
    room = asyncio.Event()
    max_pending = spec.max_pending

    async def on_ack(msg) -> None:
        data = msg.data
        if b'"error"' in data:
            reporter.error(1, f"PubAck error: {data[:200]!r}")
        else:
            state["pending_acks"] += 1
        state["acked"] += 1
        if sent_at:
            t0 = sent_at.pop(int(msg.subject[prefix_len:]), None)
            if t0 is not None:
                reporter.latency_us((time.monotonic_ns() - t0) // 1000)
        if state["pending_acks"] >= 512:
            n = state["pending_acks"]
            state["pending_acks"] = 0
            reporter.add(n, n * size)
        room.set()

    await nc.subscribe(inbox + ".*", cb=on_ack, pending_msgs_limit=1_000_000, pending_bytes_limit=1 << 30)
    subjects = list(plan.slots)
    reporter.ready()
    await _wait_event(start)

    stamper = Stamper(size)
    body = filler(size)
    quota = plan.messages or None
    deadline = time.monotonic() + spec.duration if spec.duration > 0 else None
    pacer = Pacer(plan.rate) if plan.rate > 0 else None
    total = 0
    next_sample = _gap(sample_every) - 1
    turn = 0
    n_subjects = len(subjects)
    publish = nc.publish
    while not stop.is_set():
        now = time.monotonic()
        if (deadline is not None and now >= deadline) or (quota is not None and total >= quota):
            break
        burst = 256 if pacer is None else pacer.due(total, now)
        if quota is not None:
            burst = min(burst, quota - total)
        burst = min(burst, max_pending - (total - state["acked"]))
        if burst <= 0:
            if pacer is not None and total - state["acked"] < max_pending:
                await asyncio.sleep(max(0.0, pacer.start + (total + max(1, int(pacer.rate / 1000))) / pacer.rate
                                        - time.monotonic()))
            else:
                room.clear()
                try:
                    await asyncio.wait_for(room.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
            reporter.tick()
            continue
        for _ in range(burst):
            if total == next_sample:
                next_sample = total + _gap(sample_every)
                sent_at[total] = time.monotonic_ns()
            await publish(subjects[turn], stamper.stamp() if spec.stamp else body, reply=f"{inbox}.{total}")
            turn = turn + 1 if turn + 1 < n_subjects else 0
            total += 1
        reporter.tick()
        # publish() only queues bytes: yield so the flusher writes them and
        # acks are processed, instead of stop-and-go whole windows.
        await asyncio.sleep(0)
    await nc.flush()
    # Wait for the acks of everything sent (bounded: a lost ack must not hang the run).
    settle = time.monotonic() + 30
    while state["acked"] < total and time.monotonic() < settle:
        room.clear()
        try:
            await asyncio.wait_for(room.wait(), 0.1)
        except asyncio.TimeoutError:
            pass
    if state["pending_acks"]:
        reporter.add(state["pending_acks"], state["pending_acks"] * size)
    if state["acked"] < total:
        reporter.error(total - state["acked"], "PubAcks missing after 30 s")
    await nc.close()


def consume(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    _run(_consume, spec, plan, reporter, start, stop)


async def _consume(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    nc = await nats.connect(spec.service_url, pending_size=8 * 1024 * 1024, max_reconnect_attempts=0)
    js = nc.jetstream()
    deliver = DeliverPolicy.ALL if spec.initial_position == "earliest" else DeliverPolicy.NEW
    sample_every = plan.sample_every
    subs = []
    for topic, sub_name in plan.slots:
        counters = {"n": 0, "bytes": 0, "seen": 0, "next": _gap(sample_every) - 1, "last": None,
                    "flushed": time.monotonic()}

        async def on_msg(msg, c=counters) -> None:
            data = msg.data
            if c["seen"] == c["next"]:
                c["next"] = c["seen"] + _gap(sample_every)
                sent = stamp_of(data)
                if sent is not None:
                    reporter.latency_us(time.time_ns() // 1000 - sent)
            c["seen"] += 1
            c["n"] += 1
            c["bytes"] += len(data)
            c["last"] = msg
            now = time.monotonic()
            if c["n"] >= 1000 or now - c["flushed"] >= 0.05:
                await _flush(c, now)

        async def _flush(c, now) -> None:
            reporter.add(c["n"], c["bytes"], now)
            c["n"] = c["bytes"] = 0
            c["flushed"] = now
            if c["last"] is not None:
                await c["last"].ack()  # AckAll: acknowledges everything before it too
                c["last"] = None

        config = ConsumerConfig(durable_name=durable_name(sub_name, topic), ack_policy=AckPolicy.ALL,
                                deliver_policy=deliver, max_ack_pending=100_000)
        sub = await js.subscribe(topic, durable=durable_name(sub_name, topic), cb=on_msg, manual_ack=True,
                                 config=config, stream=stream_name(topic), pending_msgs_limit=1_000_000,
                                 pending_bytes_limit=1 << 30)
        subs.append((sub, counters, _flush))
    reporter.ready()
    await _wait_event(start)
    while not stop.is_set():
        await asyncio.sleep(0.05)
        now = time.monotonic()
        for _, c, flush in subs:
            if c["n"] and now - c["flushed"] >= 0.05:
                await flush(c, now)
        reporter.tick()
    for sub, c, flush in subs:
        if c["n"]:
            await flush(c, time.monotonic())
    await nc.close()
