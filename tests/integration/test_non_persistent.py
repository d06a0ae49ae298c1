"""Non-persistent topics with the official client: delivered to the consumers
connected now, never stored; drops counted; pattern subscriptions by
RegexSubscriptionMode."""
from __future__ import annotations

import json
import re
import urllib.request
import uuid

import pulsar
import pytest

from tests.helpers import wait_for


def name(domain: str = "non-persistent", base: str | None = None) -> str:
    return f"{domain}://public/default/{base or 'np-' + uuid.uuid4().hex[:8]}"


def drain(consumer, timeout_ms: int = 1000) -> list[bytes]:
    got = []
    while True:
        try:
            msg = consumer.receive(timeout_ms)
        except pulsar.Timeout:
            return got
        got.append(msg.data())
        consumer.acknowledge(msg)


def stats(broker, topic: str) -> dict:
    path = topic.replace("non-persistent://", "")
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/non-persistent/{path}/stats", timeout=10) as resp:
        return json.loads(resp.read())


def test_only_connected_consumers_get_messages_and_nothing_is_kept(broker, pulsar_client):
    topic = name()
    exclusive = pulsar_client.subscribe(topic, "all")
    shared = [pulsar_client.subscribe(topic, "split", consumer_type=pulsar.ConsumerType.Shared) for _ in range(2)]
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    receipts = [producer.send(f"m{i}".encode()) for i in range(10)]
    assert {(r.ledger_id(), r.entry_id()) for r in receipts} == {(0, 0)}  # Pulsar's: there is no position
    assert [exclusive.receive(5000).data() for _ in range(10)] == [f"m{i}".encode() for i in range(10)]
    halves = [drain(c) for c in shared]
    assert sorted(halves[0] + halves[1]) == sorted(f"m{i}".encode() for i in range(10))
    assert halves[0] and halves[1]  # round robin over both
    late = pulsar_client.subscribe(topic, "late")
    assert drain(late) == []  # what was sent before is gone
    producer.send(b"now")
    assert late.receive(5000).data() == b"now"
    # Batches pass through whole.
    batched = pulsar_client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=20)
    for i in range(5):
        batched.send_async(f"b{i}".encode(), None)
    batched.flush()
    assert [late.receive(5000).data() for _ in range(5)] == [f"b{i}".encode() for i in range(5)]
    # The persistent topic of the same name is another topic.
    twin = pulsar_client.subscribe(name("persistent", topic.rsplit("/", 1)[1]), "twin",
                                   initial_position=pulsar.InitialPosition.Earliest)
    assert drain(twin) == []


def test_a_consumer_without_permits_misses_messages_and_the_stats_count_them(broker, pulsar_client):
    topic = name()
    slow = pulsar_client.subscribe(topic, "slow", receiver_queue_size=5)
    producer = pulsar_client.create_producer(topic, batching_enabled=False)
    for i in range(100):
        producer.send(f"m{i}".encode())
    got = drain(slow)
    assert 0 < len(got) < 100
    doc = stats(broker, topic)
    sub = doc["subscriptions"]["slow"]
    assert doc["msgInCounter"] == 100 and sub["msgOutCounter"] == len(got)
    assert sub["msgDropCounter"] == 100 - len(got) and sub["msgBacklog"] == 0
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/non-persistent/public/default", timeout=10) as resp:
        assert topic in json.loads(resp.read())


def test_regex_subscription_modes(broker, pulsar_client):
    base = f"rx-{uuid.uuid4().hex[:6]}"
    np_topic, p_topic = name(base=f"{base}-a"), name("persistent", f"{base}-b")
    # Both exist before the pattern consumers look.
    pulsar_client.subscribe(np_topic, "keep-alive")
    pulsar_client.create_producer(p_topic).send(b"create")
    pattern = re.compile(f"persistent://public/default/{base}-.*")
    modes = {mode: pulsar_client.subscribe(pattern, f"sub-{mode.name}", regex_subscription_mode=mode,
                                           initial_position=pulsar.InitialPosition.Latest)
             for mode in (pulsar.RegexSubscriptionMode.PersistentOnly,
                          pulsar.RegexSubscriptionMode.NonPersistentOnly,
                          pulsar.RegexSubscriptionMode.AllTopics)}
    pulsar_client.create_producer(np_topic).send(b"np")
    pulsar_client.create_producer(p_topic).send(b"p")
    assert sorted(drain(modes[pulsar.RegexSubscriptionMode.PersistentOnly], 3000)) == [b"p"]
    assert sorted(drain(modes[pulsar.RegexSubscriptionMode.NonPersistentOnly], 3000)) == [b"np"]
    assert sorted(drain(modes[pulsar.RegexSubscriptionMode.AllTopics], 3000)) == [b"np", b"p"]


def test_refusals_say_why(broker, pulsar_client):
    topic = name()
    consumer = pulsar_client.subscribe(topic, "s")
    with pytest.raises(pulsar.NotAllowedError):
        pulsar_client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises(Exception):
        consumer.seek(pulsar.MessageId.earliest)
    with pytest.raises(pulsar.ConsumerBusy):
        pulsar_client.subscribe(topic, "s")  # Exclusive, taken
    # The topic still serves after the refusals.
    producer = pulsar_client.create_producer(topic)
    producer.send(b"still")
    assert consumer.receive(5000).data() == b"still"
    wait_for(lambda: stats(broker, topic)["msgInCounter"] == 1, 5, what="stats to count the message")
