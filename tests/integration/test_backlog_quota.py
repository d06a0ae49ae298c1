"""Namespace backlog quotas, enforced against the official client.

The broker checks quotas every 0.2 s (and when a producer attaches) and rolls
ledgers every 5 entries, so the size measure spans several ledgers. Messages
are sent unbatched, one entry each, and one at a time until the topic's
``backlogSize`` reaches the limit: the broker blocks producers only once the
backlog has reached it, so no send before the last one can meet a block, and
the tests do not depend on when a check round runs.
"""
from __future__ import annotations

import threading

import pulsar
import pytest

from tests.helpers import quiet_logger, shared_broker, shared_client, wait_for
from .admin_support import ok, refused

CONFIG = """
backlog_quota_check_interval_s = 0.2
[storage]
max_entries_per_ledger = 5
"""
LIMIT = 20_000  # bytes; an entry of a 1000-byte message is about 1060
PAYLOAD = 1000


broker = shared_broker(CONFIG)
client = shared_client()


def _namespace(broker, name: str, policy: str | None = None, limit_time: int | None = None) -> str:
    """``public/<name>`` with, given a policy, a quota of LIMIT bytes (or of
    ``limit_time`` seconds); returns the name of its topic ``t``."""
    ok(broker, "PUT", f"namespaces/public/{name}")
    if policy is not None:
        if limit_time is None:
            kind, body = "destination_storage", {"limitSize": LIMIT, "limitTime": -1, "policy": policy}
        else:
            kind, body = "message_age", {"limitSize": -1, "limitTime": limit_time, "policy": policy}
        ok(broker, "POST", f"namespaces/public/{name}/backlogQuota?backlogQuotaType={kind}", body)
    return f"persistent://public/{name}/t"


def _stats(broker, topic: str) -> dict:
    return ok(broker, "GET", f"{topic.replace('persistent://', 'persistent/')}/stats")


def _internal(broker, topic: str) -> dict:
    return ok(broker, "GET", f"{topic.replace('persistent://', 'persistent/')}/internalStats")


def _message(i: int) -> bytes:
    return f"{i:06d}".encode().ljust(PAYLOAD, b".")


def _index(msg) -> int:
    return int(msg.data()[:6])


def _fill_to_limit(broker, producer, topic: str, first: int = 0) -> int:
    """Send messages until the backlog reaches LIMIT; returns the next index."""
    i = first
    while _stats(broker, topic)["backlogSize"] < LIMIT:
        producer.send(_message(i))
        i += 1
    return i


def _blocked(broker, topic: str) -> bool:
    stats = _stats(broker, topic)
    return stats["producersBlockedByBacklogQuota"] == "destination_storage" and not stats["publishers"]


def test_producer_exception_refuses_producers_and_sends_until_the_backlog_is_cleared(broker, client):
    topic = _namespace(broker, "refuse", "producer_exception")
    client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=False)
    sent = _fill_to_limit(broker, producer, topic)
    wait_for(lambda: _blocked(broker, topic), what="producers blocked and disconnected")

    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        client.create_producer(topic)
    with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
        producer.send(b"refused")  # the client reconnects, is refused, and fails what it holds
    assert _stats(broker, topic)["msgInCounter"] == sent

    ok(broker, "POST", f"{topic.replace('persistent://', 'persistent/')}/subscription/slow/skip_all")
    fresh = client.create_producer(topic)  # measured on attach: no wait for a check round
    fresh.send(b"accepted")
    producer.send(b"again")  # the old producer gets back in on its next reconnect
    assert _stats(broker, topic)["producersBlockedByBacklogQuota"] is None
    assert _stats(broker, topic)["msgInCounter"] == sent + 2


def test_producer_request_hold_holds_producers_until_consumers_catch_up(broker):
    topic = _namespace(broker, "hold", "producer_request_hold")
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=2, logger=quiet_logger())
    try:
        consumer = client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False)
        sent = _fill_to_limit(broker, producer, topic)
        wait_for(lambda: _blocked(broker, topic), what="producers held and disconnected")

        # A new producer does not get in: this client fails the create at once
        # with the error, a client that retries it runs into its operation timeout.
        with pytest.raises((pulsar.ProducerBlockedQuotaExceededError, pulsar.Timeout)):
            client.create_producer(topic)
        # The attached producer waits: its send is not stored while the backlog is over the quota.
        done = threading.Event()
        outcome = []
        producer.send_async(_message(sent), lambda res, msg_id: (outcome.append(res), done.set()))
        received = [consumer.receive(timeout_millis=10_000) for _ in range(sent)]
        assert [_index(m) for m in received] == list(range(sent))
        with pytest.raises(pulsar.Timeout):
            consumer.receive(timeout_millis=300)
        assert not done.is_set()

        for msg in received:
            consumer.acknowledge(msg)
        wait_for(done.is_set, timeout=30, what="the held send to complete")
        assert outcome == [pulsar.Result.Ok]
        assert _index(consumer.receive(timeout_millis=10_000)) == sent
        client.create_producer(topic).send(b"welcome")
        assert _stats(broker, topic)["producersBlockedByBacklogQuota"] is None
    finally:
        client.close()


def test_consumer_backlog_eviction_skips_the_oldest_entries_and_never_blocks(broker, client):
    topic = _namespace(broker, "evict", "consumer_backlog_eviction")
    client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=False)
    total = 50  # about 2.5 times the limit
    for i in range(total):
        producer.send(_message(i))

    wait_for(lambda: 0 < _stats(broker, topic)["backlogSize"] <= LIMIT, what="backlog evicted under the limit")
    stats = _stats(broker, topic)
    assert stats["backlogQuotaLimitSize"] == LIMIT
    assert stats["producersBlockedByBacklogQuota"] is None
    assert [p["producerName"] for p in stats["publishers"]] == [producer.producer_name()]
    kept = stats["subscriptions"]["slow"]["msgBacklog"]
    assert 0 < kept < total
    assert _internal(broker, topic)["cursors"]["slow"]["markDeletePosition"] != "None"
    producer.send(_message(total))  # still attached, still accepted

    consumer = client.subscribe(topic, "slow")
    got = []
    while len(got) < kept + 1:
        msg = consumer.receive(timeout_millis=10_000)
        got.append(_index(msg))
        consumer.acknowledge(msg)
    # The newest messages, in order: the oldest were skipped.
    assert got == list(range(total - kept, total + 1))
    consumer.close()


def test_message_age_quota_holds_producers_until_the_old_entry_is_acknowledged(broker, client):
    topic = _namespace(broker, "aged", "producer_request_hold", limit_time=1)
    consumer = client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(topic, batching_enabled=False)
    producer.send(b"old")
    assert _stats(broker, topic)["backlogQuotaLimitTime"] == 1
    wait_for(lambda: _stats(broker, topic)["producersBlockedByBacklogQuota"] == "message_age", timeout=10,
             what="the entry to age past the quota")
    with pytest.raises((pulsar.ProducerBlockedQuotaExceededError, pulsar.Timeout)):
        client.create_producer(topic)
    consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    wait_for(lambda: _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 0, what="the ack")
    client.create_producer(topic).send(b"young")


def test_message_age_eviction_skips_entries_older_than_the_limit(broker, client):
    topic = _namespace(broker, "aging", "consumer_backlog_eviction", limit_time=1)
    client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(5):
        producer.send(_message(i))
    wait_for(lambda: _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 0, timeout=10,
             what="old entries evicted")
    producer.send(_message(5))  # young: kept
    assert _stats(broker, topic)["subscriptions"]["slow"]["msgBacklog"] == 1


def test_without_a_quota_nothing_is_blocked_or_evicted(broker, client):
    topic = _namespace(broker, "free")
    client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    producer = client.create_producer(topic, batching_enabled=False)
    total = 50
    for i in range(total):
        producer.send(_message(i))
    # A check round has run since: a topic with a quota, filled after ours, got blocked.
    witness = _namespace(broker, "witness", "producer_request_hold")
    client.subscribe(witness, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    _fill_to_limit(broker, client.create_producer(witness, batching_enabled=False), witness)
    wait_for(lambda: _blocked(broker, witness), what="a check round")

    stats = _stats(broker, topic)
    assert stats["backlogSize"] > LIMIT
    assert (stats["backlogQuotaLimitSize"], stats["backlogQuotaLimitTime"]) == (-1, -1)
    assert stats["producersBlockedByBacklogQuota"] is None
    assert stats["subscriptions"]["slow"]["msgBacklog"] == total
    assert len(stats["publishers"]) == 1
    producer.send(_message(total))
    client.create_producer(topic).send(_message(total + 1))


def test_bad_quotas_are_refused_and_change_nothing(broker):
    _namespace(broker, "strict", "producer_exception")
    path = "namespaces/public/strict/backlogQuota"
    refused(broker, "POST", path, 400, {"limitSize": 10, "policy": "drop_everything"}, reason="policy")
    refused(broker, "POST", path, 400, {"limitSize": -5, "policy": "producer_exception"}, reason="limitSize")
    refused(broker, "POST", f"{path}?backlogQuotaType=bytes", 400, {"limitSize": 10}, reason="backlogQuotaType")
    quotas = ok(broker, "GET", "namespaces/public/strict/backlogQuotaMap")
    assert quotas == {"destination_storage": {"limitSize": LIMIT, "limitTime": -1, "policy": "producer_exception"}}
