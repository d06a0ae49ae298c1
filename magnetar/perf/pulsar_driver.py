"""Producer and consumer workers on the official ``pulsar-client`` (C++ core).

Why the hot loops use the client's private ``_pulsar`` objects: the public
``Producer.send_async`` type-checks ten arguments in Python per message and
every completion callback takes the GIL on the client's I/O thread, which
together cap one process near 25k msg/s whatever the broker does. Here each
message costs a ``MessageBuilder().content().build()`` and a raw
``send_async``; only one message in ``plan.sample_every`` (randomised gaps)
gets a Python callback. Receipts of one producer arrive in send order, so a
callback for its k-th message proves messages 0..k were stored: the acked
count is exact at sample granularity, and ``flush()`` settles the tail.
Falls back to the public API if the private attributes are missing.

Failure modes: a failed sampled send counts as an error with the client's
result code; a failed ``flush()`` counts every message not yet proven stored
as an error. A worker that cannot connect reports the exception and ends.
"""
from __future__ import annotations

import random
import threading
import time

from .pacing import Pacer
from .payload import Stamper, filler, stamp_of
from .reporting import Reporter
from .spec import WorkerPlan, WorkloadSpec


def _client(spec: WorkloadSpec):
    import pulsar

    return pulsar.Client(
        spec.service_url,
        io_threads=1,
        operation_timeout_seconds=30,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    )


def _gap(sample_every: int) -> int:
    # Uniform in 1..2k-1 (mean k): a fixed stride would always hit the same
    # slot of a batch, and batch slots have systematically different latency.
    return 1 if sample_every <= 1 else random.randint(1, 2 * sample_every - 1)


class _ProducerState:
    """Per-producer bookkeeping: sends handed out and sends proven stored."""

    __slots__ = ("raw", "public", "sent", "acked", "next_sample")

    def __init__(self, public, sample_every: int) -> None:
        self.public = public
        self.raw = getattr(public, "_producer", None)
        self.sent = 0
        self.acked = 0
        self.next_sample = _gap(sample_every) - 1


def produce(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    import _pulsar
    import pulsar

    client = _client(spec)
    try:
        states = [
            _ProducerState(client.create_producer(
                topic,
                batching_enabled=spec.batching,
                batching_max_messages=spec.batch_max_messages,
                batching_max_allowed_size_in_bytes=spec.batch_max_bytes,
                batching_max_publish_delay_ms=spec.batch_delay_ms,
                max_pending_messages=spec.max_pending,
                block_if_queue_full=True,
                send_timeout_millis=30_000,
            ), plan.sample_every)
            for topic in plan.slots
        ]
        reporter.ready()
        start.wait()
        _send_loop(spec, plan, reporter, stop, states, _pulsar, pulsar)
    finally:
        client.close()


def _send_loop(spec, plan, reporter, stop, states, _pulsar, pulsar) -> None:
    size = spec.size
    lock = threading.Lock()
    ok = _pulsar.Result.Ok
    sample_every = plan.sample_every

    def on_sampled(state: _ProducerState, index: int, t0_ns: int):
        def callback(res, _msg_id) -> None:
            now_ns = time.monotonic_ns()
            if res != ok:
                reporter.error(1, f"send failed: {res}")
                return
            with lock:
                done = index + 1 - state.acked
                if done > 0:
                    state.acked = index + 1
            if done > 0:
                reporter.add(done, done * size)
            reporter.latency_us((now_ns - t0_ns) // 1000, sent_at=t0_ns / 1e9)
        return callback

    builder = _pulsar.MessageBuilder
    stamper = Stamper(size)
    body = filler(size)
    stamp = spec.stamp
    quota = plan.messages or None
    deadline = time.monotonic() + spec.duration if spec.duration > 0 else None
    pacer = Pacer(plan.rate) if plan.rate > 0 else None
    n = len(states)
    total = 0
    turn = 0
    while not stop.is_set():
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            break
        if quota is not None and total >= quota:
            break
        burst = 256 if pacer is None else pacer.due(total, now)
        if quota is not None:
            burst = min(burst, quota - total)
        if burst == 0:
            pacer.wait(total)
            reporter.tick()
            continue
        for _ in range(burst):
            state = states[turn]
            turn = turn + 1 if turn + 1 < n else 0
            index = state.sent
            state.sent = index + 1
            data = stamper.stamp() if stamp else body
            if index == state.next_sample:
                state.next_sample = index + _gap(sample_every)
                cb = on_sampled(state, index, time.monotonic_ns())
            else:
                cb = None
            if state.raw is not None:
                state.raw.send_async(builder().content(data).build(), cb)
            else:  # public API: needs a callable every time
                state.public.send_async(data, cb or _ignore)
        total += burst
        reporter.sent(burst, now)
        reporter.tick()
    # Settle the tail: flush() returns once every pending send completed.
    for state in states:
        try:
            state.public.flush()
        except pulsar.PulsarException as exc:
            with lock:
                missing = state.sent - state.acked
                state.acked = state.sent
            reporter.error(missing, f"flush failed: {exc}")
            continue
        with lock:
            done = state.sent - state.acked
            state.acked = state.sent
        if done > 0:
            reporter.add(done, done * size)


def _ignore(_res, _msg_id) -> None:
    pass


def consume(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    import pulsar

    client = _client(spec)
    types = {"Exclusive": pulsar.ConsumerType.Exclusive, "Shared": pulsar.ConsumerType.Shared,
             "Failover": pulsar.ConsumerType.Failover}
    position = (pulsar.InitialPosition.Earliest if spec.initial_position == "earliest"
                else pulsar.InitialPosition.Latest)
    mode = spec.receive_mode
    if mode == "auto":
        mode = "single" if spec.stamp else "batch"
    try:
        kwargs = {}
        if mode == "batch":
            # A short timeout: batch_receive waits for a full batch or this long.
            kwargs["batch_receive_policy"] = pulsar.ConsumerBatchReceivePolicy(1000, 4 * 1024 * 1024, 5)
        consumers = []
        for i, (topic, sub) in enumerate(plan.slots):
            consumers.append(client.subscribe(
                topic, sub,
                consumer_type=types[spec.subscription_type],
                initial_position=position,
                receiver_queue_size=spec.receiver_queue,
                consumer_name=f"perf-{plan.index}-{i}",
                **kwargs,
            ))
        reporter.ready()
        start.wait()
        cumulative = spec.subscription_type != "Shared"
        loop = _receive_batches if mode == "batch" else _receive_single
        threads = [threading.Thread(target=loop, args=(c, reporter, stop, plan.sample_every, cumulative),
                                    daemon=True) for c in consumers]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            reporter.tick()
            time.sleep(0.05)
    finally:
        client.close()


def _e2e_us(msg, now_us: int) -> int:
    data = msg.data()
    sent = stamp_of(data)
    if sent is None:  # no stamp: the broker's publish time (ms resolution)
        return now_us - msg.publish_timestamp() * 1000
    return now_us - sent


def _receive_single(consumer, reporter: Reporter, stop, sample_every: int, cumulative: bool) -> None:
    import _pulsar

    raw = getattr(consumer, "_consumer", consumer)
    count = nbytes = 0
    next_sample = _gap(sample_every) - 1
    seen = 0
    last_flush = time.monotonic()
    last_msg = None
    while not stop.is_set():
        try:
            msg = raw.receive(100)
        except _pulsar.Timeout:
            msg = None
        now = time.monotonic()
        if msg is not None:
            if seen == next_sample:
                next_sample = seen + _gap(sample_every)
                reporter.latency_us(_e2e_us(msg, time.time_ns() // 1000))
            seen += 1
            count += 1
            nbytes += msg.length()
            if cumulative:
                last_msg = msg
            else:
                raw.acknowledge(msg)
        if count and (count >= 1000 or now - last_flush >= 0.05):
            reporter.add(count, nbytes, now)
            count = nbytes = 0
            last_flush = now
            if last_msg is not None:
                raw.acknowledge_cumulative(last_msg)
                last_msg = None
    if count:
        reporter.add(count, nbytes)
    if last_msg is not None:
        raw.acknowledge_cumulative(last_msg)


def _receive_batches(consumer, reporter: Reporter, stop, sample_every: int, cumulative: bool) -> None:
    raw = getattr(consumer, "_consumer", consumer)
    next_sample = _gap(sample_every) - 1
    seen = 0
    while not stop.is_set():
        msgs = raw.batch_receive()
        if not msgs:
            continue
        now_us = time.time_ns() // 1000
        n = len(msgs)
        while next_sample < seen + n:
            reporter.latency_us(_e2e_us(msgs[next_sample - seen], now_us))
            next_sample += _gap(sample_every)
        seen += n
        reporter.add(n, sum(m.length() for m in msgs))
        if cumulative:
            raw.acknowledge_cumulative(msgs[-1])
        else:
            for m in msgs:
                raw.acknowledge(m)
