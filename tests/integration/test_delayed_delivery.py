"""Delayed delivery (deliver_at / deliver_after) with the official client."""
from __future__ import annotations

import json
import urllib.request

import time
from datetime import timedelta

import pulsar

from tests.helpers import wait_for
import pytest


def _shared(client, topic, kind=pulsar.ConsumerType.Shared):
    return client.subscribe(topic, "delayed", consumer_type=kind,
                            initial_position=pulsar.InitialPosition.Earliest)


@pytest.mark.parametrize("kind", [pulsar.ConsumerType.Shared, pulsar.ConsumerType.KeyShared])
def test_delayed_message_waits_for_its_time(pulsar_client, kind):
    topic = f"delayed-{kind}"
    consumer = _shared(pulsar_client, topic, kind)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    sent = time.time()
    producer.send(b"later", deliver_after=timedelta(seconds=2))
    producer.send(b"at-once-1")
    producer.send(b"at-once-2", deliver_at=int((sent - 5) * 1000))  # a time in the past: no delay
    first = [consumer.receive(timeout_millis=5000).data() for _ in range(2)]
    assert first == [b"at-once-1", b"at-once-2"]
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=1000)  # well before its time
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"later"
    assert time.time() - sent >= 1.95
    consumer.acknowledge(msg)


def test_exclusive_subscriptions_ignore_delays(pulsar_client):
    # As in Pulsar: one consumer reading the log in order gets everything at once.
    consumer = pulsar_client.subscribe("delayed-exclusive", "ex", initial_position=pulsar.InitialPosition.Earliest)
    producer = pulsar_client.create_producer("delayed-exclusive", batching_enabled=False)
    producer.send(b"later", deliver_after=timedelta(seconds=30))
    assert consumer.receive(timeout_millis=5000).data() == b"later"


def test_delayed_messages_survive_a_restart(broker, pulsar_client):
    topic = "delayed-restart"
    consumer = _shared(pulsar_client, topic)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    sent = time.time()
    producer.send(b"later", deliver_after=timedelta(seconds=3))
    producer.send(b"now")
    msg = consumer.receive(timeout_millis=5000)
    assert msg.data() == b"now"
    consumer.acknowledge(msg)
    # Acks are grouped by the client: restart only once the broker holds this one.
    wait_for(lambda: _backlog(broker, topic) == 1, what="the ack of 'now' to be stored")
    broker.restart()  # the delayed index is rebuilt from the stored entry
    # Not before its time, even though the restart re-reads it at once (a slow
    # restart may take longer than the delay: then it is simply due).
    msg = consumer.receive(timeout_millis=10_000)
    assert msg.data() == b"later"
    assert time.time() - sent >= 2.95
    consumer.acknowledge(msg)


def _backlog(broker, topic: str) -> int:
    url = f"{broker.admin_url}/admin/v2/persistent/public/default/{topic}/stats"
    with urllib.request.urlopen(url, timeout=5) as resp:
        subs = json.loads(resp.read())["subscriptions"]
    return sum(sub["msgBacklog"] for sub in subs.values())
