"""A dispatch round that fails (a read the object store refused) is tried
again on its own: the consumers, waiting for messages, send nothing that
would wake the dispatcher, and the topic may be idle.

Found in the object storage soak's broker logs (docs/reliability.md):
"dispatcher of chaos-keyshared failed" after a kill-objectstore refused a
ranged GET, and nothing ran it again until the next publish."""
from __future__ import annotations

import asyncio
import time

from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.protocol import pb
from magnetar.storage import StorageError

from .harness import close_service, make_service, producer, send_of, topic_of


class _Delivered:
    """A consumer's sink that keeps what reached its client."""

    def __init__(self) -> None:
        self.entries = []

    def deliver(self, consumer, entries, redeliveries) -> None:
        self.entries.extend(entries)

    def writable(self) -> bool:
        return True

    def closed(self, consumer, assigned=None) -> None:
        pass

    def active_change(self, consumer, active) -> None:
        pass


async def test_a_failed_read_is_tried_again_without_another_wake_up(tmp_path):
    service = await make_service(tmp_path)
    topic = await topic_of(service, "dispatch-retry")
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    for seq in range(3):
        send, block = send_of(p.name, seq)
        await topic.publish(p, send, block)
    ledger = topic.ledger
    real_read = ledger.read_entries
    refused = []

    async def refuse_once(*args, **kwargs):  # the object store down for one GET
        if not refused:
            refused.append(args)
            raise StorageError("reading ledger 3 failed: object store: connection refused")
        return await real_read(*args, **kwargs)

    ledger.read_entries = refuse_once
    sink = _Delivered()
    consumer = Consumer(consumer_id=1, name="c", subscription=None, sink=sink)  # type: ignore[arg-type]
    try:
        await topic.subscribe("s", pb.CommandSubscribe.Shared, consumer,
                              initial_position=pb.CommandSubscribe.Earliest)
        consumer.permits = 100  # the client's FLOW, before the first round ran
        consumer.subscription.on_new_entries()
        deadline = time.monotonic() + 10
        while len(sink.entries) < 3:  # no publish, ack or FLOW from here on
            assert time.monotonic() < deadline, f"delivered {len(sink.entries)} of 3 after a refused read"
            await asyncio.sleep(0.05)
        assert refused, "the read was never refused: the test did not test the retry"
    finally:
        await close_service(service)


async def test_a_cursor_changed_elsewhere_unloads_its_topic_at_the_ack_that_met_it(tmp_path):
    """A cursor write whose answer etcd lost can land after all: the cursor's
    stored version is then ahead of the one the broker holds, every later
    write fails its compare, and a dispatcher that only tried again left a
    Failover subscription silent for minutes (the hosts topology, seed 728).
    The topic is unloaded instead, at the acknowledgement that met the
    conflict (the cursor's managed ledger tells it), not at a later dispatch
    round: here nothing is published after the ack. Its next load reads the
    cursor as stored."""
    service = await make_service(tmp_path)
    topic = await topic_of(service, "cursor-fenced")
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    sink = _Delivered()
    consumer = Consumer(consumer_id=1, name="c", subscription=None, sink=sink)  # type: ignore[arg-type]
    try:
        await topic.subscribe("s", pb.CommandSubscribe.Failover, consumer,
                              initial_position=pb.CommandSubscribe.Earliest)
        consumer.permits = 100
        send, block = send_of(p.name, 0)
        await topic.publish(p, send, block)
        deadline = time.monotonic() + 10
        while not sink.entries:
            assert time.monotonic() < deadline, "the first entry never arrived"
            await asyncio.sleep(0.05)
        cursor = topic.subscriptions["s"].cursor
        cursor._version += 1  # our last write landed, its answer was lost: the version held is stale
        try:
            await consumer.subscription.acknowledge([sink.entries[0].position])
        except StorageError:
            pass  # the ack is not applied; the next owner of the cursor delivers the entry again
        deadline = time.monotonic() + 10
        while service.topics.get(str(topic.name)) is topic:
            assert time.monotonic() < deadline, "the topic kept its fenced cursor: the subscription is stalled"
            await asyncio.sleep(0.05)
        assert topic.closed
    finally:
        await close_service(service)
