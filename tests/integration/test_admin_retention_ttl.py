"""Namespace retention and message TTL, enforced and observable through stats.

The broker rolls ledgers every 5 entries and checks TTLs every 0.2 s, so
trimming shows within a second. Trimming deletes closed ledgers only, and
never the one holding the last entry: a fully consumed topic of 20 entries
keeps its last 5.
"""
from __future__ import annotations

import pulsar

from tests.helpers import shared_broker, shared_client, wait_for
from .admin_support import ok

CONFIG = """
message_expiry_check_interval_s = 0.2
[storage]
max_entries_per_ledger = 5
"""
LAST_LEDGER = 5  # entries of the ledger holding the last entry, which is never trimmed


broker = shared_broker(CONFIG)
client = shared_client()


def _namespace(broker, name: str, **policies) -> str:
    ok(broker, "PUT", f"namespaces/public/{name}", policies or None)
    return f"persistent://public/{name}"


def _internal(broker, topic: str) -> dict:
    return ok(broker, "GET", f"{topic.replace('persistent://', 'persistent/')}/internalStats")


def _stats(broker, topic: str) -> dict:
    return ok(broker, "GET", f"{topic.replace('persistent://', 'persistent/')}/stats")


def _produce_and_consume(client, topic: str, count: int, size: int = 10) -> None:
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(count):
        producer.send(f"{i:0{size}d}".encode())
    for _ in range(count):
        consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    producer.close()
    consumer.close()


def _acked_all(broker, topic: str) -> bool:
    return _stats(broker, topic)["subscriptions"]["sub"]["msgBacklog"] == 0


def test_infinite_retention_keeps_consumed_ledgers_until_the_policy_changes(broker, client):
    kept = _namespace(broker, "keep", retention_policies={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
    _namespace(broker, "nokeep")
    for ns in ("keep", "nokeep"):
        _produce_and_consume(client, f"persistent://public/{ns}/t", 20)
    # Without retention the consumed ledgers go; with it they stay.
    wait_for(lambda: _internal(broker, "persistent://public/nokeep/t")["numberOfEntries"] == LAST_LEDGER,
             what="consumed ledgers trimmed")
    wait_for(lambda: _acked_all(broker, f"{kept}/t"), what="acks persisted")
    assert _internal(broker, f"{kept}/t")["numberOfEntries"] == 20
    # The policy is applied to the loaded topic as soon as it changes.
    ok(broker, "POST", "namespaces/public/keep/retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0})
    wait_for(lambda: _internal(broker, f"{kept}/t")["numberOfEntries"] == LAST_LEDGER,
             what="trim after the policy change")


def test_size_retention_keeps_the_newest_consumed_data(broker, client):
    ns = _namespace(broker, "sized", retention_policies={"retentionTimeInMinutes": -1, "retentionSizeInMB": 1})
    _produce_and_consume(client, f"{ns}/t", 30, size=100_000)  # 3 MB in ledgers of 500 kB
    wait_for(lambda: _internal(broker, f"{ns}/t")["totalSize"] <= 1024 * 1024, what="size-based trim")
    internal = _internal(broker, f"{ns}/t")
    assert internal["numberOfEntries"] >= 5  # the newest consumed ledger fits in 1 MB: kept


def test_message_ttl_expires_backlog_and_frees_storage(broker, client):
    ns = _namespace(broker, "ttl", message_ttl_in_seconds=1)
    topic = f"{ns}/t"
    consumer = client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest)
    consumer.close()  # a subscription nobody reads: its backlog only grows
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode())
    assert _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 20
    wait_for(lambda: _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 0, timeout=10,
             what="backlog expired by TTL")
    wait_for(lambda: _internal(broker, topic)["numberOfEntries"] == LAST_LEDGER, what="expired ledgers trimmed")
    # Fresh messages are not expired at once.
    producer.send(b"fresh")
    assert _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 1
    producer.close()
