"""Producer workers that speak the Pulsar protocol themselves (``--driver raw``).

Why: the official client costs a few Python calls per message, which caps
one generator process near 200k msg/s whatever the broker does. Here one
SEND frame carries a whole batched entry built by :mod:`.raw_batch` (the
official client's batch format, compression NONE) with no per-message Python
work, so the generator costs tens of microseconds per entry instead of
per message. The broker does the same work per entry as for the official
client: it parses the command, checks the CRC and stores the block.

What a worker does: one asyncio (uvloop when installed) connection to the
service URL, CONNECT, one PRODUCER per topic slot of its plan (broker-assigned
names), then, per producer, SEND frames of
:func:`.raw_batch.messages_per_batch` messages while at most
``spec.max_pending`` messages await their receipt. With ``spec.rate`` the
pacer's schedule decides: every ``batch_delay_ms`` the messages due so far
go out as one (smaller) entry, as the official client's batch timer would.
``spec.duration`` / ``plan.messages`` / ``stop`` end the run; the receipts
still outstanding are then awaited (30 s at most, the official client's send
timeout).

Counting: receipts arrive in send order per producer; a SEND_RECEIPT for the
entry at the head of the window counts its messages as acked, a SEND_ERROR
counts them as errors with the broker's error code. Latency: one histogram
sample per *entry* (each entry is one sample, whatever its message count),
from the moment its first message was due (the pacer's schedule in paced
runs, so a late generator shows up as latency; the frame write at max rate)
to its receipt.

Receipts are read in runs (:meth:`Connection.receive_data_in_runs`: one
compiled call per received chunk gives each producer's stretch of
consecutive sequence ids), and the window holds one record per *write*
(an unbatched burst of entries written together, with one due time), so
a run of receipts settles whole records at once: the same samples and
counts, recorded as "``n`` entries of this latency". End-to-end runs stamp every body of an entry with that same
moment (wall clock, from one monotonic-to-wall offset per run so stamps rise
with due times: :class:`.payload.WallClock`), in the format
:func:`.payload.stamp_of` reads.

Consumers are the official client's: :func:`consume` is
:func:`.pulsar_driver.consume`.

Without batching (``--no-batching``) every entry is one plain message, as
the official client sends with batching off (:mod:`.raw_plain`): up to
:data:`PLAIN_BURST` such SEND frames go out per write, each with its own
receipt, latency sample and window slot.

Limits: no LOOKUP (the service URL must be the broker owning the topics,
as with a standalone broker or the perf sink), no reconnect, no
compression, no partitioned topics. Failure modes: a connection or a
producer that cannot be set up raises (the runner reports the worker as
failed during setup); a lost connection or a CLOSE_PRODUCER from the broker
during the run counts that producer's outstanding messages as errors and
ends the worker with an error; a receipt out of order is a protocol error
and ends the worker the same way.
"""
from __future__ import annotations

import asyncio
import collections
import time

from magnetar.client.connection import parse_service_url
from magnetar.client.topic import full_topic_name
from magnetar.protocol import Connection, ProtocolError, Role, Type, command, pb
from magnetar.protocol.errors import error_name

from .pacing import Pacer
from .payload import WallClock
from .pulsar_driver import consume  # noqa: F401  (consumers stay on the official client)
from .raw_batch import BatchEncoder, messages_per_batch
from .raw_plain import PlainEncoder
from .reporting import Reporter
from .spec import WorkerPlan, WorkloadSpec

CLIENT_VERSION = "Magnetar-perf-raw"
PROTOCOL_VERSION = 20
SETUP_TIMEOUT = 30.0
#: How long receipts still outstanding after the last send are awaited.
DRAIN_TIMEOUT = 30.0
#: Longest a waiting sender sleeps before it checks ``stop`` and the deadline again.
POLL = 0.1
#: Unbatched entries written per pass of a producer's pump (one write).
PLAIN_BURST = 256
_REPLIES = {Type.PRODUCER_SUCCESS: "producer_success", Type.SUCCESS: "success", Type.ERROR: "error"}


def produce(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    runner(_produce(spec, plan, reporter, start, stop))


class _Link(asyncio.Protocol):
    """The connection: routes replies to requests and receipts to producers."""

    def __init__(self) -> None:
        self.proto = Connection(Role.CLIENT)
        self.transport: asyncio.Transport | None = None
        self.connected = asyncio.get_running_loop().create_future()
        self.requests: dict[int, asyncio.Future] = {}
        self.producers: dict[int, _Producer] = {}
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.transport.write(self.proto.send(command(
            Type.CONNECT, client_version=CLIENT_VERSION, auth_method_name="none",
            protocol_version=PROTOCOL_VERSION)))

    def connection_lost(self, exc) -> None:
        reason = f"connection lost: {exc}" if exc else "connection closed by the broker"
        for fut in (self.connected, *self.requests.values()):
            if not fut.done():
                fut.set_exception(ConnectionError(reason))
                fut.exception()  # retrieved: nobody may be waiting on it any more
        for producer in self.producers.values():
            producer.fail(reason)
        self.writable.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def data_received(self, data: bytes) -> None:
        try:
            self._dispatch(self.proto.receive_data_in_runs(data))
        except ProtocolError as exc:
            self._abort(f"protocol error: {exc}")

    def _dispatch(self, items) -> None:
        now_ns = time.monotonic_ns()
        for frame in items:
            if type(frame) is tuple:  # a run of receipts: (producer_id, first, last, count)
                self._producer(frame[0]).on_receipts(frame[1], frame[3], now_ns)
                continue
            cmd = frame.command
            t = cmd.type
            if t == Type.SEND_RECEIPT:
                r = cmd.send_receipt
                self._producer(r.producer_id).on_receipts(r.sequence_id, 1, now_ns)
            elif t == Type.SEND_ERROR:
                e = cmd.send_error
                self._producer(e.producer_id).on_error(e.sequence_id, e.error, e.message)
            elif t == Type.CONNECTED:
                if not self.connected.done():
                    self.connected.set_result(cmd.connected)
            elif t == Type.PING:
                self.write(self.proto.send(command(Type.PONG)))
            elif t == Type.CLOSE_PRODUCER:
                self._producer(cmd.close_producer.producer_id).fail("the broker closed the producer")
            elif t in _REPLIES:
                body = getattr(cmd, _REPLIES[t])
                if t == Type.PRODUCER_SUCCESS and not body.producer_ready:
                    continue  # queued behind an exclusive producer: the ready reply follows
                fut = self.requests.pop(body.request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
                elif t == Type.ERROR and not self.connected.done():
                    self.connected.set_exception(ConnectionError(f"{error_name(body.error)}: {body.message}"))

    def _producer(self, producer_id: int) -> "_Producer":
        producer = self.producers.get(producer_id)
        if producer is None:
            raise ProtocolError(f"reply for unknown producer id {producer_id}")
        return producer

    def _abort(self, reason: str) -> None:
        for producer in self.producers.values():
            producer.fail(reason)
        if self.transport is not None:
            self.transport.abort()

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    async def request(self, cmd: pb.BaseCommand, request_id: int, timeout: float) -> pb.BaseCommand:
        fut = asyncio.get_running_loop().create_future()
        self.requests[request_id] = fut
        self.write(self.proto.send(cmd))
        reply = await asyncio.wait_for(fut, timeout)
        if reply.type == Type.ERROR:
            raise RuntimeError(f"{error_name(reply.error.error)}: {reply.error.message}")
        return reply


class _Producer:
    """One producer's window: entries written and not yet answered, in order."""

    def __init__(self, producer_id: int, topic: str, reporter: Reporter, size: int) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.reporter = reporter
        self.size = size
        self.encoder: BatchEncoder | None = None
        #: The broker's last stored sequence id for this producer name + 1 (0 for a new name).
        self.first_sequence = 0
        #: Per write, in order: (first sequence id, entries, messages per entry,
        #: due time in monotonic ns). The entries' sequence ids are the first's,
        #: then one "messages per entry" apart.
        self.window: collections.deque[tuple[int, int, int, int]] = collections.deque()
        self.pending = 0
        self.space = asyncio.Event()
        self.failure: str | None = None

    def on_receipts(self, sequence_id: int, count: int, now_ns: int) -> None:
        """Receipts for ``count`` entries whose sequence ids run on from
        ``sequence_id`` one by one; the window's head must be exactly those."""
        window = self.window
        acked = 0
        while count:
            if not window:
                raise ProtocolError(f"producer {self.producer_id}: receipt {sequence_id} with nothing in flight")
            first, entries, per_entry, due_ns = window[0]
            if sequence_id != first:
                raise ProtocolError(f"producer {self.producer_id}: receipt for {sequence_id}, expected {first}")
            # A run steps by one: only entries of one message each go many at a time.
            take = min(count, entries) if per_entry == 1 else 1
            if take == entries:
                window.popleft()
            else:
                window[0] = (first + take * per_entry, entries - take, per_entry, due_ns)
            acked += take * per_entry
            self.reporter.latency_us((now_ns - due_ns) // 1000, take)
            sequence_id += take
            count -= take
        self.pending -= acked
        self.reporter.add(acked, acked * self.size)
        self.space.set()

    def on_error(self, sequence_id: int, code: int, message: str) -> None:
        for i, (first, entries, per_entry, due_ns) in enumerate(self.window):
            j, off = divmod(sequence_id - first, per_entry)
            if off == 0 and 0 <= j < entries:
                # That entry leaves its record: what was written before and after it stays.
                del self.window[i]
                if j + 1 < entries:
                    self.window.insert(i, (sequence_id + per_entry, entries - j - 1, per_entry, due_ns))
                if j > 0:
                    self.window.insert(i, (first, j, per_entry, due_ns))
                self.pending -= per_entry
                self.reporter.error(per_entry, f"SEND_ERROR {error_name(code)}: {message}")
                self.space.set()
                return
        self.reporter.error(1, f"SEND_ERROR {error_name(code)} for unknown sequence id {sequence_id}: {message}")

    def fail(self, reason: str) -> None:
        """The producer cannot go on: what is in flight will never be answered."""
        if self.failure is not None:
            return
        self.failure = reason
        if self.pending:
            self.reporter.error(self.pending, f"{reason} ({self.pending} messages without receipt)")
        self.window.clear()
        self.pending = 0
        self.space.set()


async def _produce(spec: WorkloadSpec, plan: WorkerPlan, reporter: Reporter, start, stop) -> None:
    loop = asyncio.get_running_loop()
    if "," in spec.service_url:
        raise ValueError(f"--driver raw speaks to one broker (no lookups): give the URL of the broker owning "
                         f"the topics alone, not {spec.service_url}")
    host, port = parse_service_url(spec.service_url)
    transport, link = await asyncio.wait_for(loop.create_connection(_Link, host, port), SETUP_TIMEOUT)
    try:
        await asyncio.wait_for(link.connected, SETUP_TIMEOUT)
        batch = messages_per_batch(spec.size, spec.batch_max_messages if spec.batching else 1,
                                   spec.batch_max_bytes, spec.max_pending)
        producers = []
        for i, topic in enumerate(plan.slots):
            producer = _Producer(i, topic, reporter, spec.size)
            link.producers[i] = producer
            reply = await link.request(command(Type.PRODUCER, topic=full_topic_name(topic), producer_id=i,
                                               request_id=i), i, SETUP_TIMEOUT)
            success = reply.producer_success
            producer.encoder = (BatchEncoder(i, success.producer_name, spec.size, batch, stamp=spec.stamp)
                                if spec.batching else PlainEncoder(i, success.producer_name, spec.size,
                                                                   stamp=spec.stamp))
            producer.first_sequence = max(0, success.last_sequence_id + 1)
            producers.append(producer)
        reporter.ready()
        await loop.run_in_executor(None, start.wait)
        t0 = time.monotonic()
        deadline = t0 + spec.duration if spec.duration > 0 else None
        n = len(producers)
        quotas = [plan.messages // n + (1 if i < plan.messages % n else 0) for i in range(n)] \
            if plan.messages else [None] * n
        rate = plan.rate / n if plan.rate > 0 else 0.0
        await asyncio.gather(*(
            _pump(link, p, spec, reporter, stop, deadline, quota, Pacer(rate, t0) if rate else None)
            for p, quota in zip(producers, quotas)))
        await _drain(link, producers, reporter)
        failures = [p.failure for p in producers if p.failure]
        if failures:
            raise RuntimeError(failures[0])
        await _close(link, producers)
    finally:
        transport.close()


async def _wait(event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        pass


async def _pump(link: _Link, producer: _Producer, spec: WorkloadSpec, reporter: Reporter, stop,
                deadline: float | None, quota: int | None, pacer: Pacer | None) -> None:
    """Write entries until the quota, the deadline or ``stop``."""
    encoder = producer.encoder
    plain = isinstance(encoder, PlainEncoder)
    full = min(PLAIN_BURST, max(1, spec.max_pending)) if plain else encoder.max_messages
    window = max(spec.max_pending, full)
    # A paced producer sends what is due once per batch delay, like the
    # official client's batch timer; waking more often only makes smaller entries.
    quantum = 1
    if pacer is not None:
        quantum = max(1, min(full, round(pacer.rate * max(1, spec.batch_delay_ms) / 1000)))
    stamp = encoder.stamp
    # One offset for the run: stamps then rise with due times (see WallClock).
    wall = WallClock()
    sent = 0
    seq = producer.first_sequence
    while producer.failure is None:
        now = time.monotonic()
        reporter.tick(now)
        if stop.is_set() or (deadline is not None and now >= deadline):
            break
        count = full if quota is None else min(full, quota - sent)
        if count <= 0:
            break
        if pacer is not None:
            due = pacer.due(sent, now)
            if due < min(quantum, count):
                next_at = pacer.start + (sent + min(quantum, count)) / pacer.rate
                await asyncio.sleep(min(POLL, max(0.0, next_at - now)))
                continue
            count = min(count, due)
        if producer.pending + count > window:
            producer.space.clear()
            await _wait(producer.space, POLL)
            continue
        if not link.writable.is_set():
            await _wait(link.writable, POLL)
            continue
        now_ns = time.monotonic_ns()
        due_ns = now_ns
        if pacer is not None:
            # The first message of the entry was due then: lateness is latency.
            due_ns = min(now_ns, int((pacer.start + sent / pacer.rate) * 1e9))
        stamp_us = wall.us(due_ns) if stamp else None
        if plain:
            # Unbatched: up to PLAIN_BURST entries of one message, in one write.
            producer.window.append((seq, count, 1, due_ns))
            link.write(encoder.frames(seq, count, time.time_ns() // 1_000_000, stamp_us))
        else:
            frame = encoder.frame(seq, count, time.time_ns() // 1_000_000, stamp_us)
            producer.window.append((seq, 1, count, due_ns))
            link.write(frame)
        producer.pending += count
        seq += count
        sent += count
        if producer.pending >= window or pacer is not None:
            # Let receipts in: a full window waits above anyway.
            await asyncio.sleep(0)


async def _drain(link: _Link, producers: list[_Producer], reporter: Reporter) -> None:
    """Await the outstanding receipts; count what never came as errors."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    for producer in producers:
        while producer.pending and producer.failure is None:
            if time.monotonic() >= deadline:
                producer.fail(f"no receipt within {DRAIN_TIMEOUT:.0f} s after the last send")
                break
            producer.space.clear()
            await _wait(producer.space, POLL)
            reporter.tick()


async def _close(link: _Link, producers: list[_Producer]) -> None:
    """CLOSE_PRODUCER each producer (politeness: the broker logs less); errors ignored."""
    base = len(producers)
    for i, producer in enumerate(producers):
        try:
            await link.request(command(Type.CLOSE_PRODUCER, producer_id=producer.producer_id,
                                       request_id=base + i), base + i, 5.0)
        except (asyncio.TimeoutError, ConnectionError, RuntimeError):
            return
