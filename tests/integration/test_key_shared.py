"""Key_Shared subscriptions and Shared priority levels with the official client."""
from __future__ import annotations

import collections

import socket

import pulsar
import pytest

from magnetar.broker.subscriptions.key_shared import slot_of
from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command

from tests.helpers import wait_for


def _keys(n: int) -> list[str]:
    """``n`` keys, half of them hashing into each half of the slot space."""
    low = [k for k in (f"key-{i}" for i in range(1000)) if slot_of(k.encode()) < 32768][: n // 2]
    high = [k for k in (f"key-{i}" for i in range(1000)) if slot_of(k.encode()) >= 32768][: n - n // 2]
    return low + high


def _send(producer, keys: list[str], rounds: int, start: int = 0) -> None:
    for r in range(start, start + rounds):
        for k in keys:
            producer.send_async(f"{k}:{r}".encode(), None, partition_key=k)
    producer.flush()


def _drain(consumers, total: int, ack: bool = True, timeout: float = 20.0) -> list[tuple[int, str, int]]:
    """Receive ``total`` messages from any of ``consumers``: (consumer index, key, round)."""
    got: list[tuple[int, str, int]] = []

    def poll():
        for i, c in enumerate(consumers):
            try:
                msg = c.receive(timeout_millis=20)
            except pulsar.Timeout:
                continue
            key, r = msg.data().decode().split(":")
            assert key == msg.partition_key()
            got.append((i, key, int(r)))
            if ack:
                c.acknowledge(msg)
        return len(got) >= total

    wait_for(poll, timeout=timeout, interval=0, what=f"{total} messages (have {len(got)})")
    return got


def _subscribe(client, topic, name, **kw):
    return client.subscribe(topic, "ks", consumer_type=pulsar.ConsumerType.KeyShared, consumer_name=name,
                            initial_position=pulsar.InitialPosition.Earliest, **kw)


def _check_order(got) -> None:
    by_key = collections.defaultdict(list)
    for _, key, r in got:
        by_key[key].append(r)
    for key, rounds in by_key.items():
        assert rounds == sorted(rounds), f"{key} out of order: {rounds}"


def test_auto_split_each_key_to_one_consumer_in_order(pulsar_client):
    topic = "ks-auto"
    consumers = [_subscribe(pulsar_client, topic, f"c{i}") for i in range(3)]
    producer = pulsar_client.create_producer(topic, batching_enabled=True,
                                             batching_type=pulsar.BatchingType.KeyBased,
                                             batching_max_publish_delay_ms=5)
    keys = _keys(30)
    _send(producer, keys, rounds=20)
    got = _drain(consumers, 600)
    owners = collections.defaultdict(set)
    for i, key, _ in got:
        owners[key].add(i)
    assert all(len(o) == 1 for o in owners.values()), owners
    assert len({next(iter(o)) for o in owners.values()}) == 3, "every consumer owns some keys"
    _check_order(got)
    assert sorted((k, r) for _, k, r in got) == sorted((k, r) for k in keys for r in range(20))


def test_new_consumer_waits_until_the_old_owner_acked_its_keys(pulsar_client):
    topic = "ks-join"
    c1 = _subscribe(pulsar_client, topic, "c1")
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    keys = _keys(20)
    _send(producer, keys, rounds=3)
    held = []
    for _ in range(60):
        held.append(c1.receive(timeout_millis=10_000))  # received, not acknowledged yet
    c2 = _subscribe(pulsar_client, topic, "c2")  # takes the upper half of the slots
    _send(producer, keys, rounds=3, start=3)
    # c1 keeps its own keys flowing; c2's keys are still draining from c1.
    first = _drain([c1], 30)
    assert {k for _, k, _ in first} == set(keys[:10])
    with pytest.raises(pulsar.Timeout):
        c2.receive(timeout_millis=500)
    for msg in held:
        c1.acknowledge(msg)
    rest = _drain([c2], 30)
    assert {k for _, k, _ in rest} == set(keys[10:])
    _check_order(rest)
    assert sorted(r for _, k, r in rest if k == keys[15]) == [3, 4, 5]


def test_sticky_ranges(pulsar_client):
    topic = "ks-sticky"

    def sticky(name, ranges):
        policy = pulsar.ConsumerKeySharedPolicy(key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=ranges)
        return _subscribe(pulsar_client, topic, name, key_shared_policy=policy)

    low = sticky("low", [(0, 32767)])
    high = sticky("high", [(32768, 65535)])
    with pytest.raises(Exception, match="ConsumerAssignError|assign"):
        sticky("overlap", [(30000, 40000)])
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    keys = _keys(20)
    _send(producer, keys, rounds=5)
    got = _drain([low, high], 100)
    for i, key, _ in got:
        assert (slot_of(key.encode()) >= 32768) == (i == 1), (i, key)
    _check_order(got)


def test_ordering_key_wins_over_partition_key(pulsar_client):
    topic = "ks-ordering-key"
    c1 = _subscribe(pulsar_client, topic, "c1")
    c2 = _subscribe(pulsar_client, topic, "c2")
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    keys = _keys(10)
    # Same partition key for all, ordering keys spread over both halves.
    for r in range(3):
        for k in keys:
            producer.send(f"{k}:{r}".encode(), partition_key="same-for-all", ordering_key=k)
    got = []
    for i, c in enumerate((c1, c2)):
        while True:
            try:
                msg = c.receive(timeout_millis=1000)
            except pulsar.Timeout:
                break
            got.append((i, msg.data().decode().split(":")[0]))
            c.acknowledge(msg)
    assert len(got) == 30
    for i, key in got:
        assert (slot_of(key.encode()) >= 32768) == (i == 1)


def test_shared_priority_levels(broker, pulsar_client):
    # The official Python client cannot set a priority level: speak the protocol directly.
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(command(Type.CONNECT, client_version="raw-test", protocol_version=20)))
    frames: list = []

    def read(n):
        while len(frames) < n:
            frames.extend(conn.receive_data(sock.recv(65536)))
        return [frames.pop(0) for _ in range(n)]

    assert read(1)[0].command.type == Type.CONNECTED
    for cid, level in ((1, 1), (2, 0)):  # consumer 2 has the better (lower) level
        sock.sendall(conn.send(command(Type.SUBSCRIBE, topic="priority", subscription="prio", subType=1,
                                       consumer_id=cid, request_id=cid, priority_level=level,
                                       initialPosition=pb.CommandSubscribe.Earliest)))
    assert [f.command.type for f in read(2)] == [Type.SUCCESS, Type.SUCCESS]
    sock.sendall(conn.send(command(Type.FLOW, consumer_id=1, messagePermits=100))
                 + conn.send(command(Type.FLOW, consumer_id=2, messagePermits=3))
                 + conn.send(command(Type.PING)))
    assert read(1)[0].command.type == Type.PONG  # both FLOWs were handled
    producer = pulsar_client.create_producer("priority", batching_enabled=False)
    for i in range(8):
        producer.send(f"m{i}".encode())
    got = [(f.command.message.consumer_id, bytes(f.block.payload)) for f in read(8)]
    # The better level takes everything while it has permits, then the next level.
    assert got == [(2, b"m0"), (2, b"m1"), (2, b"m2")] + [(1, f"m{i}".encode()) for i in range(3, 8)]
    sock.close()
