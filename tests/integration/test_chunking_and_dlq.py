"""Chunked messages and dead-letter topics with the official client."""
from __future__ import annotations

import os

import pulsar
import pytest

from magnetar_harness.broker import configured_broker

BIG = 12 * 1024 * 1024  # over the 5 MiB max message size: the client splits it


def _chunked_round_trip(client, topic: str) -> None:
    consumer = client.subscribe(topic, "chunks", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False, chunking_enabled=True,
                                      send_timeout_millis=60_000)
    payloads = [os.urandom(BIG), b"small", os.urandom(BIG // 2)]
    for p in payloads:
        producer.send(p)
    for p in payloads:
        msg = consumer.receive(timeout_millis=30_000)
        assert msg.data() == p
        consumer.acknowledge(msg)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=200)


def test_chunked_message_round_trip(pulsar_client):
    _chunked_round_trip(pulsar_client, "chunked")


def test_chunks_are_not_duplicates_with_deduplication_on(tmp_path):
    broker = configured_broker(tmp_path, "deduplication_enabled = true\n").start()
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        _chunked_round_trip(client, "chunked-dedup")
    finally:
        client.close()
        assert broker.stop() == 0


def test_nacked_message_lands_in_the_dead_letter_topic(pulsar_client):
    topic = "persistent://public/default/dlq-source"
    dlq = "persistent://public/default/dlq-source-dead"
    dlq_consumer = pulsar_client.subscribe(dlq, "inspect", initial_position=pulsar.InitialPosition.Earliest)
    consumer = pulsar_client.subscribe(
        topic, "work", consumer_type=pulsar.ConsumerType.Shared,
        initial_position=pulsar.InitialPosition.Earliest,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=3, dead_letter_topic=dlq),
    )
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    producer.send(b"poison", properties={"k": "v"})
    producer.send(b"fine")
    counts = []
    done = False
    while not done:
        msg = consumer.receive(timeout_millis=10_000)
        if msg.data() == b"fine":
            consumer.acknowledge(msg)
            continue
        counts.append(msg.redelivery_count())
        consumer.negative_acknowledge(msg)
        done = len(counts) == 4
    assert counts == [0, 1, 2, 3]
    dead = dlq_consumer.receive(timeout_millis=10_000)
    assert dead.data() == b"poison"
    assert dead.properties().get("k") == "v"
    dlq_consumer.acknowledge(dead)
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=500)  # acknowledged on the source once dead-lettered
