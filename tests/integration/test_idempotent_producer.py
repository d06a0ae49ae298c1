"""Idempotent producers of our client against a real broker: retries never duplicate.

Each test starts its own broker process. The retries are real: a proxy cuts
the connection after the broker stored an entry but before its receipt got
through, or the broker is killed -9 in the middle of a stream of sends.
"""
from __future__ import annotations

import asyncio
from collections import deque

import pytest

from magnetar.client import AsyncClient, Client, errors
from magnetar.client.link import LinkState
from magnetar.protocol.commands import Type

from tests.helpers import unique, wait_for
from .cutting_proxy import CuttingProxy
from .topic_log import read_topic_ours, sequence_report


def read_all(url: str, topic: str) -> list:
    return asyncio.run(read_topic_ours(url, topic))


@pytest.mark.parametrize("batching", [False, True])
def test_receipt_lost_after_append_is_retried_without_duplicate(broker, batching):
    topic = unique("cut")
    proxy = CuttingProxy(broker.port)
    client = Client(proxy.url, operation_timeout_seconds=10, backoff_max_seconds=0.5)
    try:
        producer = client.create_producer(topic, idempotent=True, batching_enabled=batching,
                                          batching_max_publish_delay_ms=1)
        assert producer.pid is not None and producer.generation is not None
        first = producer.send(b"m0")
        proxy.cut_next(Type.SEND_RECEIPT)  # the broker stores m1, the client never hears of it
        retried = producer.send(b"m1")  # blocks through the reconnect and the resend
        last = producer.send(b"m2")
        assert proxy.cuts == 1
        assert [first.offset, retried.offset, last.offset] == [0, 1, 2]
    finally:
        client.close()
        proxy.close()
    stored = read_all(broker.service_url, topic)
    assert [m.data() for m in stored] == [b"m0", b"m1", b"m2"]
    # The retry was answered with the original receipt: the id of the stored entry.
    assert stored[1].message_id().entry_key == retried.entry_key


@pytest.mark.slow
async def test_kill_minus_nine_three_times_during_100k_idempotent_sends(broker):
    total, window = 100_000, 4000
    topic = unique("crashes")
    client = AsyncClient(broker.service_url, operation_timeout_seconds=30, backoff_max_seconds=0.5)
    producer = await client.create_producer(
        topic, idempotent=True, batching_enabled=True, batching_max_messages=200,
        batching_max_publish_delay_ms=2, max_pending_messages=window + 1000,
        send_timeout_millis=0,  # never give up: retry through every crash
    )
    pid = producer.pid
    acked = [0]

    async def crash_three_times() -> None:
        for target in (15_000, 40_000, 70_000):
            while acked[0] < target:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(broker.restart, True)

    crasher = asyncio.get_running_loop().create_task(crash_three_times())

    async def settle_oldest() -> None:
        oldest = in_flight.popleft()  # receipts come in order: the oldest settles first
        if not oldest.done():
            if crasher.done():
                crasher.result()  # a failed restart: raise it rather than wait for ever
            await asyncio.wait_for(oldest, 120)
        oldest.result()
        acked[0] += 1

    in_flight: deque = deque()
    for i in range(total):
        if len(in_flight) >= window:
            await settle_oldest()
        in_flight.append(producer.send_nowait(b"%d" % i))
    while in_flight:
        await settle_oldest()
    await asyncio.wait_for(crasher, 60)
    assert producer.pid == pid  # one identity through every restart
    await client.close()

    stored = await read_topic_ours(broker.service_url, topic)
    numbers = [int(m.data()) for m in stored]
    report = sequence_report(numbers, total) or sequence_report([m.offset for m in stored], total)
    assert not report, f"{report}\nbroker warnings:\n{broker.notable_log()}"


def test_zombie_with_an_older_generation_is_fenced(broker):
    topic = unique("zombie")
    client = Client(broker.service_url, operation_timeout_seconds=10)
    successor_client = Client(broker.service_url, operation_timeout_seconds=10)
    try:
        zombie = client.create_producer(topic, idempotent=True)
        idle_zombie = client.create_producer(topic, idempotent=True, pid_lease_ms=300)
        for i in range(3):
            zombie.send(b"old-%d" % i)
        # A restarted process resumes the identity: a takeover.
        successor = successor_client.create_producer(topic, idempotent=True, pid=zombie.pid)
        assert successor.pid == zombie.pid and successor.generation == zombie.generation + 1
        assert successor.next_sequence == 3  # continues where the broker's log stops
        successor.send(b"new-0")
        with pytest.raises(errors.ProducerFenced):
            zombie.send(b"zombie write")
        with pytest.raises(errors.ProducerFenced):
            zombie.send(b"and again")  # the producer stays unusable
        successor.send(b"new-1")

        # A holder that sends nothing learns it was fenced from its lease renewal.
        successor_client.create_producer(topic, idempotent=True, pid=idle_zombie.pid)
        wait_for(lambda: idle_zombie._p.state is LinkState.FAILED, timeout=10, what="the renewal to fail")
        with pytest.raises(errors.ProducerFenced):
            idle_zombie.send(b"late")
    finally:
        client.close()
        successor_client.close()
    assert [m.data() for m in read_all(broker.service_url, topic)] == [
        b"old-0", b"old-1", b"old-2", b"new-0", b"new-1"]


def test_resuming_an_unknown_pid_is_refused(broker):
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        with pytest.raises(errors.NotAllowedError):
            client.create_producer(unique("unknown"), idempotent=True, pid=987_654)


@pytest.mark.parametrize("crash", [False, True])
def test_pid_blocks_never_repeat_across_broker_restarts(broker, crash):
    topic = unique("pids")
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        before = client.create_producer(topic, idempotent=True)
        before.send(b"a")
        old_pid = before.pid
    broker.restart(crash=crash)
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        fresh = client.create_producer(topic, idempotent=True)
        assert fresh.pid > old_pid
        assert (fresh.pid - 1) // 100 > (old_pid - 1) // 100, "a new broker run must start a new block of 100"
        # The lease itself survived the restart: the identity can be resumed.
        resumed = client.create_producer(topic, idempotent=True, pid=old_pid)
        assert resumed.next_sequence == 1
        resumed.send(b"b")
    assert [m.data() for m in read_all(broker.service_url, topic)] == [b"a", b"b"]
