"""A model-checked state machine of exclusive producers (issue 4).

Random interleavings of create / close / disconnect / reconnect / send over
three writers run against the real Topic, storage and metadata store. After
every step:

- at most one producer is attached (one writer at a time);
- no producer that lost its access (closed, disconnected, fenced, or never
  admitted) ever had a send appended;
- the log is a series of segments, one per writer session (writer + topic
  epoch), never interleaved.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from magnetar.broker.errors import BrokerError
from magnetar.protocol import pb

from .harness import RecordingSink, close_service, make_service, producer, send_of, topic_of

MODES = st.sampled_from([pb.Exclusive, pb.ExclusiveWithFencing, pb.WaitForExclusive])
WRITERS = st.integers(0, 2)


class ExclusiveProducers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="magnetar-sm-"))
        self.service = self.run(make_service(self.dir))
        self.topic = self.run(topic_of(self.service))
        self.current: dict[int, object] = {}  # writer -> its latest broker Producer
        self.waiting: dict[int, asyncio.Future] = {}
        self.lost: set[int] = set()  # producer ids (unique here) of Producers that lost access
        self.log: list[tuple[int, int]] = []  # (writer, epoch) of each appended entry
        self.next_id = 0
        self.trace: list[str] = []  # what happened, for assertion messages (failures here depend on timing)

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def call(self, fn):
        """Run a plain broker call inside the loop (it may schedule tasks)."""
        async def inside():
            return fn()
        return self.run(inside())

    def settle(self) -> None:
        async def spin():
            for _ in range(20):
                await asyncio.sleep(0)
        self.run(spin())

    def teardown(self) -> None:
        self.run(close_service(self.service))
        for waiter in self.waiting.values():
            if waiter.done() and not waiter.cancelled():
                waiter.exception()
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _new_producer(self, writer: int, mode: int):
        self.next_id += 1
        p = producer(self.topic, self.next_id, name=f"w{writer}", mode=mode)
        def fenced(p=p):  # the broker closed it
            self.lost.add(p.producer_id)
            self.trace.append(f"broker disconnected w{writer}#{p.producer_id}")
        p.sink = RecordingSink(on_closed=fenced)
        return p

    def _admit(self, writer: int, p, epoch) -> None:
        try:
            waiter = self.run(self.topic.add_producer(p, epoch))
        except BrokerError as exc:
            self.lost.add(p.producer_id)
            self.trace.append(f"w{writer}#{p.producer_id} mode {p.access_mode} epoch {epoch}: refused ({exc})")
            return
        self.trace.append(f"w{writer}#{p.producer_id} mode {p.access_mode} epoch {epoch}: "
                          f"{'waiting' if waiter is not None else 'admitted'} (topic epoch {p.epoch})")
        self.current[writer] = p
        old_waiter = self.waiting.pop(writer, None)
        if old_waiter is not None and old_waiter.done() and not old_waiter.cancelled():
            old_waiter.exception()  # retrieved: it belonged to the writer's previous producer
        if waiter is not None:
            self.waiting[writer] = waiter
        self.settle()

    @rule(writer=WRITERS, mode=MODES)
    def create(self, writer, mode):
        old = self.current.get(writer)
        if old is not None and old.producer_id not in self.lost:
            return
        self._admit(writer, self._new_producer(writer, mode), None)

    @rule(writer=WRITERS)
    def reconnect(self, writer):
        """The same writer comes back after a lost connection, naming its epoch."""
        old = self.current.get(writer)
        if old is None or old.producer_id not in self.lost or not old.epoch:
            return
        self._admit(writer, self._new_producer(writer, old.access_mode), old.epoch)

    @rule(writer=WRITERS)
    def close(self, writer):
        p = self.current.get(writer)
        if p is None:
            return
        self.lost.add(p.producer_id)
        self.trace.append(f"close w{writer}#{p.producer_id}")
        self.call(lambda: self.topic.remove_producer(p))
        self.settle()

    @rule(writer=WRITERS)
    def send(self, writer):
        p = self.current.get(writer)
        if p is None:
            return
        send, block = send_of(p.name, len(self.log))
        access: list[bool] = []

        async def publish():
            # Judge access in the same loop step as the broker's check (publish
            # decides without awaiting): a WaitForExclusive producer may be
            # promoted by tasks that run just before this one.
            waiter = self.waiting.get(writer)
            ready = waiter is None or (waiter.done() and not waiter.cancelled() and waiter.exception() is None)
            access.append(ready and p.producer_id not in self.lost)
            return await self.topic.publish(p, send, block)
        try:
            self.run(publish())
        except BrokerError as exc:
            self.trace.append(f"send w{writer}#{p.producer_id}: refused ({type(exc).__name__})")
            return
        self.trace.append(f"send w{writer}#{p.producer_id}: appended, topic epoch {p.epoch}")
        assert access[0], f"a send from w{writer} landed after it lost its access:\n" + "\n".join(self.trace)
        self.log.append((writer, p.epoch))

    @invariant()
    def one_writer_at_a_time(self):
        assert len(self.topic.producers) <= 1

    @invariant()
    def segments_never_interleave(self):
        seen: set[tuple[int, int]] = set()
        previous = None
        for session in self.log:
            if session != previous:
                assert session not in seen, f"session {session} resumed after another writer: {self.log}"
                seen.add(session)
                previous = session


ExclusiveProducers.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestExclusiveProducers = ExclusiveProducers.TestCase
