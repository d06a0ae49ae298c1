"""Partitioned topics, pattern and multi-topic consumers with the official client.

Partition counts come from the admin API; the client learns them through
PARTITIONED_METADATA and routes messages itself.
"""
from __future__ import annotations

import re
import socket
from collections import defaultdict

import pulsar
import pytest

from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command

from tests.helpers import shared_broker, shared_client
from .admin_support import call, ok

NS = "public/default"


broker = shared_broker()
client = shared_client()


def _partitioned(broker, name: str, partitions: int) -> str:
    ok(broker, "PUT", f"persistent/{NS}/{name}/partitions", partitions)
    return f"persistent://{NS}/{name}"


def _drain(consumer, count: int) -> list:
    out = []
    for _ in range(count):
        msg = consumer.receive(timeout_millis=10_000)
        consumer.acknowledge(msg)
        out.append(msg)
    return out


def _msg_in(broker, topic: str, partition: int) -> int:
    local = topic.rsplit("/", 1)[1]
    return ok(broker, "GET", f"persistent/{NS}/{local}-partition-{partition}/stats")["msgInCounter"]


def test_keys_stick_to_partitions_and_a_consumer_gets_everything(broker, client):
    topic = _partitioned(broker, "keyed", 4)
    consumer = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    sent = {f"k{i % 10}-{i}".encode(): f"k{i % 10}" for i in range(200)}
    for body, key in sent.items():
        producer.send(body, partition_key=key)
    received = _drain(consumer, len(sent))
    assert sorted(m.data() for m in received) == sorted(sent)
    partitions_of_key = defaultdict(set)
    for msg in received:
        partitions_of_key[msg.partition_key()].add(msg.topic_name())
    assert all(len(p) == 1 for p in partitions_of_key.values()), partitions_of_key
    used = {p for ps in partitions_of_key.values() for p in ps}
    assert len(used) > 1 and all(name.startswith(topic + "-partition-") for name in used)
    assert sum(_msg_in(broker, topic, i) for i in range(4)) == len(sent)
    # The partitioned stats add the partitions up.
    total = ok(broker, "GET", f"persistent/{NS}/keyed/partitioned-stats")
    assert total["msgInCounter"] == len(sent) and total["metadata"] == {"partitions": 4}
    producer.close()
    consumer.close()


def test_routing_modes(broker, client):
    topic = _partitioned(broker, "routed", 4)
    consumer = client.subscribe(topic, "all", initial_position=pulsar.InitialPosition.Earliest)
    round_robin = client.create_producer(topic, batching_enabled=False,
                                         message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(40):
        round_robin.send(f"rr-{i}".encode())
    assert all(_msg_in(broker, topic, i) == 10 for i in range(4))
    single = client.create_producer(topic, batching_enabled=False,
                                    message_routing_mode=pulsar.PartitionsRoutingMode.UseSinglePartition)
    for i in range(20):
        single.send(f"single-{i}".encode())
    counts = [_msg_in(broker, topic, i) for i in range(4)]
    assert sorted(c - 10 for c in counts) == [0, 0, 0, 20]
    custom = client.create_producer(topic, batching_enabled=False,
                                    message_router=lambda msg, n: int(msg.partition_key()[1:]) % n)
    for i in range(8):
        custom.send(f"custom-{i}".encode(), partition_key="p3")
    assert _msg_in(broker, topic, 3) - counts[3] == 8
    received = _drain(consumer, 68)
    assert len({m.data() for m in received}) == 68
    for p in (round_robin, single, custom, consumer):
        p.close()


def test_reader_on_one_partition(broker, client):
    topic = _partitioned(broker, "readable", 2)
    producer = client.create_producer(topic, batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(10):
        producer.send(f"m{i}".encode())
    reader = client.create_reader(f"{topic}-partition-1", pulsar.MessageId.earliest)
    got = [reader.read_next(timeout_millis=10_000).data() for _ in range(5)]
    assert len(set(got)) == 5 and not reader.has_message_available()
    reader.close()
    producer.close()


def test_growing_a_topic_keeps_subscriptions(broker, client):
    topic = _partitioned(broker, "growing", 2)
    consumer = client.subscribe(topic, "durable-sub")
    consumer.close()
    ok(broker, "POST", f"persistent/{NS}/growing/partitions", 3)
    assert ok(broker, "GET", f"persistent/{NS}/growing/partitions") == {"partitions": 3}
    # The new partition has the subscription, at its start: nothing sent there is lost.
    assert ok(broker, "GET", f"persistent/{NS}/growing-partition-2/subscriptions") == ["durable-sub"]
    producer = client.create_producer(f"{topic}-partition-2")
    producer.send(b"early")
    producer.close()
    stats = ok(broker, "GET", f"persistent/{NS}/growing-partition-2/stats")
    assert stats["subscriptions"]["durable-sub"]["msgBacklog"] == 1


def test_pattern_consumer_gets_matching_topics_only(broker, client):
    ok(broker, "PUT", f"persistent/{NS}/abc-plain")
    _partitioned(broker, "abc-parted", 2)
    ok(broker, "PUT", f"persistent/{NS}/xyz-other")
    consumer = client.subscribe(re.compile(f"persistent://{NS}/abc-.*"), "pattern",
                                initial_position=pulsar.InitialPosition.Earliest)
    for name in ("abc-plain", "abc-parted", "xyz-other"):
        producer = client.create_producer(f"persistent://{NS}/{name}", batching_enabled=False)
        for i in range(3):
            producer.send(f"{name}-{i}".encode())
        producer.close()
    received = sorted(m.data().decode() for m in _drain(consumer, 6))
    assert received == [f"{n}-{i}" for n in ("abc-parted", "abc-plain") for i in range(3)]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=300)  # nothing from xyz-other
    consumer.close()


def test_multi_topic_consumer(broker, client):
    topics = [f"persistent://{NS}/multi-a", f"persistent://{NS}/multi-b"]
    consumer = client.subscribe(topics, "multi", initial_position=pulsar.InitialPosition.Earliest)
    for topic in topics:
        producer = client.create_producer(topic)
        producer.send(topic.encode())
        producer.close()
    assert sorted(m.data().decode() for m in _drain(consumer, 2)) == topics
    consumer.close()


def test_topics_of_namespace_filters_by_pattern(broker):
    _partitioned(broker, "listed", 2)
    ok(broker, "PUT", f"persistent/{NS}/listed-too")
    conn = Connection(Role.CLIENT)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(conn.send(command(Type.CONNECT, client_version="test", protocol_version=20)))
        frames: list = []
        while not frames:
            frames = conn.receive_data(sock.recv(65536))
        assert frames[0].command.type == Type.CONNECTED

        def ask(**fields) -> pb.CommandGetTopicsOfNamespaceResponse:
            sock.sendall(conn.send(command(Type.GET_TOPICS_OF_NAMESPACE, request_id=1, namespace=NS, **fields)))
            while True:
                for frame in conn.receive_data(sock.recv(65536)):
                    if frame.command.type == Type.GET_TOPICS_OF_NAMESPACE_RESPONSE:
                        return frame.command.getTopicsOfNamespaceResponse

        answer = ask(topics_pattern=f"persistent://{NS}/listed.*")
        assert answer.filtered
        assert sorted(answer.topics) == [f"persistent://{NS}/listed-partition-0",
                                         f"persistent://{NS}/listed-partition-1", f"persistent://{NS}/listed-too"]
        again = ask(topics_pattern=f"persistent://{NS}/listed.*", topics_hash=answer.topics_hash)
        assert not again.changed and not again.topics
        everything = ask()
        assert not everything.filtered and set(answer.topics) < set(everything.topics)


def test_unknown_namespace_is_refused(broker, client):
    with pytest.raises(Exception, match="TopicNotFound|not found|NotFound"):
        client.create_producer("persistent://public/no-such-ns/t")
    status, answer = call(broker, "GET", "persistent/public/no-such-ns")
    assert status == 404, answer
