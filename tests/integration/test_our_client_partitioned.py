"""Magnetar's client on partitioned topics: a producer and a consumer over
every partition, Pulsar's routing modes and key hashes, and the official
client on the same topics."""
from __future__ import annotations

import json
import urllib.request
import uuid
from collections import Counter

import pulsar
import pytest

from magnetar.client import (Client, ConsumerType, HashingScheme, InitialPosition, PartitionedConsumer,
                             PartitionedProducer, PartitionsRoutingMode, errors)
from magnetar.client.partition_routing import java_string_hash, murmur3_32_hash

PARTITIONS = 4


def partitioned_topic(broker, partitions: int = PARTITIONS) -> str:
    name = f"parts-{uuid.uuid4().hex[:8]}"
    req = urllib.request.Request(f"{broker.admin_url}/admin/v2/persistent/public/default/{name}/partitions",
                                 data=json.dumps(partitions).encode(), method="PUT",
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
    return f"persistent://public/default/{name}"


@pytest.fixture
def client(broker):
    c = Client(broker.service_url, operation_timeout_seconds=15)
    yield c
    c.close()


def drain(consumer, timeout_ms: int = 3000) -> list:
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_ms)
        except (errors.Timeout, pulsar.Timeout):
            return got
        got.append(msg)
        consumer.acknowledge(msg)


def test_round_robin_spreads_keyless_messages_and_one_consumer_reads_every_partition(broker, client):
    topic = partitioned_topic(broker)
    consumer = client.subscribe(topic, "all", consumer_type=ConsumerType.Shared)
    assert isinstance(consumer._c, PartitionedConsumer) and len(consumer._c.partitions) == PARTITIONS
    producer = client.create_producer(topic)
    assert isinstance(producer._p, PartitionedProducer)
    ids = [producer.send(f"m{i}".encode()) for i in range(40)]
    assert Counter(mid.partition() for mid in ids) == {p: 10 for p in range(PARTITIONS)}
    got = drain(consumer)
    assert sorted(m.data() for m in got) == sorted(f"m{i}".encode() for i in range(40))
    assert {m.topic_name() for m in got} == {f"{topic}-partition-{p}" for p in range(PARTITIONS)}
    consumer.close()
    # Every acknowledgement reached its partition: nothing comes back.
    again = client.subscribe(topic, "all", consumer_type=ConsumerType.Shared)
    assert drain(again, 1500) == []


def test_a_key_always_lands_on_the_partition_its_hash_names(broker, client):
    topic = partitioned_topic(broker)
    keys = [f"customer-{i}" for i in range(20)] + ["ünïcode-key"]
    java = client.create_producer(topic)  # JavaStringHash, as the Java client
    murmur = client.create_producer(topic, hashing_scheme=HashingScheme.Murmur3_32Hash)
    for key in keys:
        for _ in range(2):
            assert java.send(b"j", partition_key=key).partition() == java_string_hash(key) % PARTITIONS, key
            assert murmur.send(b"m", partition_key=key).partition() == murmur3_32_hash(key) % PARTITIONS, key
    assert len({java_string_hash(k) % PARTITIONS for k in keys}) == PARTITIONS  # the keys did spread


def test_our_partitioned_producer_and_consumer_with_the_official_ones(broker, client, pulsar_client):
    topic = partitioned_topic(broker)
    official_consumer = pulsar_client.subscribe(topic, "theirs", consumer_type=pulsar.ConsumerType.Shared)
    our_consumer = client.subscribe(topic, "ours", consumer_type=ConsumerType.Shared)
    client.create_producer(topic).send(b"from ours")
    pulsar_client.create_producer(topic).send(b"from theirs")
    assert sorted(m.data() for m in drain(official_consumer)) == [b"from ours", b"from theirs"]
    assert sorted(m.data() for m in drain(our_consumer)) == [b"from ours", b"from theirs"]


def test_single_partition_and_custom_routing(broker, client):
    topic = partitioned_topic(broker)
    single = client.create_producer(topic, message_routing_mode=PartitionsRoutingMode.UseSinglePartition)
    assert len({single.send(b"x").partition() for _ in range(12)}) == 1
    custom = client.create_producer(topic, message_routing_mode=PartitionsRoutingMode.CustomPartition,
                                    message_router=lambda msg, n: int(msg.properties()["p"]))
    assert [custom.send(b"c", properties={"p": str(p)}).partition() for p in (3, 1, 2)] == [3, 1, 2]
    wild = client.create_producer(topic, message_routing_mode=PartitionsRoutingMode.CustomPartition,
                                  message_router=lambda msg, n: n + 5)
    with pytest.raises(errors.InvalidConfiguration, match="expected 0..3"):
        wild.send(b"nowhere")
    with pytest.raises(errors.InvalidConfiguration, match="message_router"):
        client.create_producer(topic, message_routing_mode=PartitionsRoutingMode.CustomPartition)
    with pytest.raises(errors.InvalidConfiguration, match="BoostHash"):
        client.create_producer(topic, hashing_scheme=HashingScheme.BoostHash)
    with pytest.raises(errors.OperationNotSupported, match="partition"):
        single.send(b"conditional", expected_offset=0)


def test_cumulative_ack_moves_only_the_messages_partition(broker, client):
    topic = partitioned_topic(broker, 2)
    producer = client.create_producer(topic)  # round robin: partitions alternate
    for i in range(6):
        producer.send(f"m{i}".encode())
    consumer = client.subscribe(topic, "failover", consumer_type=ConsumerType.Failover,
                                initial_position=InitialPosition.Earliest)
    got = [consumer.receive(5000) for _ in range(6)]
    last_of_one = max((m for m in got if m.message_id().partition() == 1), key=lambda m: m.message_id())
    consumer.acknowledge_cumulative(last_of_one)
    consumer.close()
    again = client.subscribe(topic, "failover", consumer_type=ConsumerType.Failover)
    left = drain(again)
    assert {m.message_id().partition() for m in left} == {0} and len(left) == 3
