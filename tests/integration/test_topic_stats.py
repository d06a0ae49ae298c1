"""Topic stats in Pulsar's shapes, with the official client's traffic:
/stats (rates of the last stats interval, consumers, publishers, backlogs,
timestamps), partitioned-stats (totals and perPartition), internalStats
(ledgers and cursors), and `magnetar admin topics stats` without nulls.

The broker samples its counters every 0.3 s (``stats_update_frequency_s``),
so rates show within a second of traffic."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pulsar

from tests.helpers import shared_broker, shared_client, wait_for
from .admin_support import ok

broker = shared_broker("stats_update_frequency_s = 0.3\n")
client = shared_client()

#: Fields the issue named: each is a number, bool or string in every document, never null or absent.
TOPIC_FIELDS = ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "averageMsgSize", "msgInCounter",
                "bytesInCounter", "msgOutCounter", "bytesOutCounter", "storageSize", "backlogSize",
                "earliestMsgPublishTimeInBacklogs", "waitingPublishers", "deduplicationStatus")
SUB_FIELDS = ("type", "msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter", "msgRateRedeliver",
              "messageAckRate", "msgBacklog", "backlogSize", "earliestMsgPublishTimeInBacklog",
              "msgBacklogNoDelayed", "blockedSubscriptionOnUnackedMsgs", "msgDelayed", "unackedMessages",
              "msgRateExpired", "totalMsgExpired", "lastExpireTimestamp", "lastConsumedFlowTimestamp",
              "lastConsumedTimestamp", "lastAckedTimestamp", "lastMarkDeleteAdvancedTimestamp", "isDurable",
              "isReplicated")
CONSUMER_FIELDS = ("consumerName", "msgRateOut", "msgThroughputOut", "bytesOutCounter", "msgOutCounter",
                   "msgRateRedeliver", "messageAckRate", "availablePermits", "unackedMessages",
                   "blockedConsumerOnUnackedMsgs", "address", "connectedSince", "clientVersion",
                   "lastAckedTimestamp", "lastConsumedTimestamp", "lastConsumedFlowTimestamp")
PUBLISHER_FIELDS = ("accessMode", "msgRateIn", "msgThroughputIn", "averageMsgSize", "producerId", "producerName",
                    "address", "connectedSince", "clientVersion", "msgInCounter", "bytesInCounter")


def _present(doc: dict, fields: tuple[str, ...], what: str) -> None:
    missing = [f for f in fields if doc.get(f) is None]
    assert not missing, f"{what} lacks {missing}: {doc}"


def _path(topic: str) -> str:
    return "persistent/" + topic.removeprefix("persistent://")


class _Traffic:
    """A producer sending ~200 msg/s and a consumer receiving and acknowledging, in a thread."""

    def __init__(self, topic: str, consumer, producer) -> None:
        self.topic, self.consumer, self.producer = topic, consumer, producer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "_Traffic":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(10):
                self.producer.send_async(b"m" * 100, None)
            self.producer.flush()
            while True:
                try:
                    msg = self.consumer.receive(timeout_millis=20)
                except pulsar.Timeout:
                    break
                self.consumer.acknowledge(msg)
            time.sleep(0.05)


def test_stats_of_a_persistent_topic_with_traffic_fill_pulsars_fields(broker, client):
    topic = "persistent://public/default/stats-traffic"
    started_ms = int(time.time() * 1000)
    consumer = client.subscribe(topic, "live", consumer_name="reader-1", consumer_type=pulsar.ConsumerType.Shared)
    idle = client.subscribe(topic, "idle", consumer_name="idle-1")  # receives nothing: its backlog grows
    producer = client.create_producer(topic, producer_name="writer-1", batching_enabled=False)
    with _Traffic(topic, consumer, producer):
        def flowing():
            doc = ok(broker, "GET", f"{_path(topic)}/stats")
            live = doc["subscriptions"]["live"]
            if live["msgRateOut"] > 0 and live["messageAckRate"] > 0 and doc["publishers"] \
                    and doc["publishers"][0]["msgRateIn"] > 0 and live["consumers"][0]["msgRateOut"] > 0:
                return doc
            return None

        doc = wait_for(flowing, timeout=20, what="rates of the traffic in /stats")
    _present(doc, TOPIC_FIELDS, "topic")
    assert doc["msgRateIn"] > 0 and doc["msgThroughputIn"] > 0 and doc["msgRateOut"] > 0
    assert 100 <= doc["averageMsgSize"] < 400, doc["averageMsgSize"]  # 100-byte payloads and their metadata
    live, slow = doc["subscriptions"]["live"], doc["subscriptions"]["idle"]
    for sub in (live, slow):
        _present(sub, SUB_FIELDS, "subscription")
    assert live["type"] == "Shared" and live["msgThroughputOut"] > 0
    assert live["lastAckedTimestamp"] >= started_ms and live["lastConsumedTimestamp"] >= started_ms
    assert live["lastConsumedFlowTimestamp"] >= started_ms and live["lastMarkDeleteAdvancedTimestamp"] >= started_ms
    assert slow["msgBacklog"] > 0 and slow["backlogSize"] > 0 and slow["unackedMessages"] > 0
    [reader] = live["consumers"]
    _present(reader, CONSUMER_FIELDS, "consumer")
    assert reader["consumerName"] == "reader-1" and ":" in reader["address"]
    assert reader["availablePermits"] > 0 and reader["blockedConsumerOnUnackedMsgs"] is False
    assert reader["messageAckRate"] > 0 and reader["lastAckedTimestamp"] >= started_ms
    assert reader["connectedSince"].endswith("Z") and reader["clientVersion"]
    [idle_consumer] = slow["consumers"]
    assert idle_consumer["consumerName"] == "idle-1" and idle_consumer["unackedMessages"] > 0
    [writer] = doc["publishers"]
    _present(writer, PUBLISHER_FIELDS, "publisher")
    assert writer["producerName"] == "writer-1" and writer["msgThroughputIn"] > 0 and writer["clientVersion"]
    # Once the traffic stops, the next intervals' rates fall to 0.
    wait_for(lambda: ok(broker, "GET", f"{_path(topic)}/stats")["msgRateIn"] == 0, timeout=10,
             what="the rate in back to 0")
    # The earliest publish time in the backlog is read when asked for, as Pulsar's getEarliestTimeInBacklog.
    asked = ok(broker, "GET", f"{_path(topic)}/stats?getEarliestTimeInBacklog=true")
    earliest = asked["subscriptions"]["idle"]["earliestMsgPublishTimeInBacklog"]
    assert started_ms - 1000 <= earliest <= int(time.time() * 1000)
    assert asked["earliestMsgPublishTimeInBacklogs"] == earliest
    assert asked["oldestBacklogMessageSubscriptionName"] == "idle"
    for c in (consumer, idle, producer):
        c.close()


def test_redeliveries_show_as_the_subscriptions_and_consumers_redelivery_rate(broker, client):
    topic = "persistent://public/default/stats-redeliver"
    consumer = client.subscribe(topic, "nack", consumer_type=pulsar.ConsumerType.Shared,
                                negative_ack_redelivery_delay_ms=50)
    producer = client.create_producer(topic, batching_enabled=False)
    for i in range(20):
        producer.send(b"%d" % i)
    stop = threading.Event()

    def nack_everything():
        while not stop.is_set():
            try:
                consumer.negative_acknowledge(consumer.receive(timeout_millis=50))
            except pulsar.Timeout:
                pass

    worker = threading.Thread(target=nack_everything, daemon=True)
    worker.start()
    try:
        def redelivering():
            sub = ok(broker, "GET", f"{_path(topic)}/stats")["subscriptions"]["nack"]
            return sub if sub["msgRateRedeliver"] > 0 and sub["consumers"][0]["msgRateRedeliver"] > 0 else None

        sub = wait_for(redelivering, timeout=20, what="a redelivery rate")
    finally:
        stop.set()
        worker.join(timeout=10)
    assert sub["unackedMessages"] >= 0 and sub["msgBacklog"] == 20
    consumer.close()
    producer.close()


def test_partitioned_stats_are_the_partitions_totals_with_per_partition_stats(broker, client):
    topic = "persistent://public/default/stats-parted"
    ok(broker, "PUT", f"{_path(topic)}/partitions", 3)
    consumer = client.subscribe(topic, "all", consumer_name="all-1")
    producer = client.create_producer(topic, producer_name="parted-writer", batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(30):
        producer.send(b"x" * 50)
    doc = ok(broker, "GET", f"{_path(topic)}/partitioned-stats")
    parts = doc["partitions"]
    assert doc["metadata"] == {"partitions": 3} and len(parts) == 3
    assert doc["msgInCounter"] == 30 == sum(p["msgInCounter"] for p in parts.values())
    assert doc["bytesInCounter"] == sum(p["bytesInCounter"] for p in parts.values())
    assert doc["storageSize"] == sum(p["storageSize"] for p in parts.values())
    total_sub = doc["subscriptions"]["all"]
    assert total_sub["msgBacklog"] == sum(p["subscriptions"]["all"]["msgBacklog"] for p in parts.values())
    assert len(total_sub["consumers"]) == 3  # the consumer's link to each partition
    assert [p["producerName"] for p in doc["publishers"]] == ["parted-writer"]  # one producer, merged
    assert doc["publishers"][0]["msgInCounter"] == 30
    _present(doc, TOPIC_FIELDS, "partitioned topic")
    _present(total_sub, SUB_FIELDS, "partitioned subscription")
    assert "partitions" not in ok(broker, "GET", f"{_path(topic)}/partitioned-stats?perPartition=false")
    consumer.close()
    producer.close()


def test_internal_stats_have_pulsars_ledgers_and_cursors(broker, client):
    topic = "persistent://public/default/stats-internal"
    consumer = client.subscribe(topic, "half", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic, batching_enabled=False)
    ids = [producer.send(b"%d" % i) for i in range(6)]
    for _ in range(6):
        msg = consumer.receive(timeout_millis=10_000)
        if msg.message_id().entry_id() in (0, 2, 3):  # acked out of order: a hole at 1
            consumer.acknowledge(msg)
    doc = wait_for(lambda: (d := ok(broker, "GET", f"{_path(topic)}/internalStats"))["cursors"]["half"]
                   ["markDeletePosition"].endswith(":0") and d, timeout=10, what="the mark-delete at entry 0")
    ledger = ids[0].ledger_id()
    assert doc["numberOfEntries"] == 6 and doc["lastConfirmedEntry"] == f"{ledger}:5"
    assert doc["state"] == "LedgerOpened" and doc["currentLedgerEntries"] == 6
    assert doc["ledgers"][-1]["ledgerId"] == ledger and doc["ledgers"][-1]["entries"] == 6
    cursor = doc["cursors"]["half"]
    assert cursor["markDeletePosition"] == f"{ledger}:0" and cursor["readPosition"] == f"{ledger}:6"
    assert cursor["individuallyDeletedMessages"] == f"[({ledger}:1..{ledger}:3]]"
    assert cursor["totalNonContiguousDeletedMessagesRange"] == 1 and cursor["state"] == "Open"
    assert cursor["active"] is True and cursor["messagesConsumedCounter"] == 6
    consumer.close()
    producer.close()


def test_the_cli_prints_stats_and_internal_stats_without_nulls(broker, client):
    topic = "persistent://public/default/stats-cli"
    consumer = client.subscribe(topic, "cli-sub")
    producer = client.create_producer(topic)
    producer.send(b"x")
    consumer.acknowledge(consumer.receive(timeout_millis=10_000))
    out = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.admin_url, "topics", "stats",
                          topic], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "cli-sub" in out.stdout and "null" not in out.stdout and "None" not in out.stdout, out.stdout
    internal = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--admin-url", broker.admin_url, "topics",
                               "stats-internal", topic], capture_output=True, text=True, timeout=60)
    assert internal.returncode == 0, internal.stderr
    assert "markDeletePosition" in internal.stdout and "null" not in internal.stdout, internal.stdout
    consumer.close()
    producer.close()
