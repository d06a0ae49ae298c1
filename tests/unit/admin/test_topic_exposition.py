"""The per-topic series written straight to text: what Prometheus parses
from it, and the event loop runs between its chunks (one scrape of 100,000
topics held the loop 65 s when it was built by prometheus_client)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from prometheus_client.parser import text_string_to_metric_families

from magnetar.admin.pulsar_metrics import PulsarCollector
from magnetar.admin.topic_exposition import CHUNK_TOPICS, TopicExposition
from magnetar.broker.interval_rates import IntervalRates
from magnetar.broker.topic_name import parse
from magnetar.storage import Position
from magnetar.storage.entry import LedgerInfo


def _subscription(j: int):
    consumer = SimpleNamespace(unacked_messages=lambda: 4)
    return SimpleNamespace(name=f"s{j}", backlog=lambda: j + 1, consumers=[consumer], durable=True,
                           cursor=SimpleNamespace(mark_delete_position=Position(1, j)), dispatcher=None,
                           interval_rates=IntervalRates(5), expired=0, last_acked_ms=0, last_consumed_ms=0,
                           msg_out=10 * j, bytes_out=1000 * j)


def _topic(i: int, subscriptions: int = 0):
    subs = {f"s{j}": _subscription(j) for j in range(subscriptions)}
    ledger = SimpleNamespace(total_size=2_000_000 + i, ledgers=[LedgerInfo(1, 10, 1000, 0.0, "Open")])
    return SimpleNamespace(name=parse(f"persistent://t/ns{i % 3}/topic-{i}"), subscriptions=subs, msg_in=i,
                           bytes_in=100 * i, msg_out=0, bytes_out=0, ledger=ledger,
                           producers={"p": 1} if i % 2 else {}, backlog_quotas=[])


def _broker(topics):
    return SimpleNamespace(service=SimpleNamespace(topics={str(t.name): t for t in topics}),
                           config=SimpleNamespace(cluster_name="c1"))


async def _scrape(exposition: TopicExposition) -> str:
    return b"".join([chunk async for chunk in exposition.chunks()]).decode()


async def test_the_text_parses_to_every_topic_and_subscription_series():
    topics = [_topic(i, subscriptions=i % 3) for i in range(50)]
    broker = _broker(topics)
    exposition = TopicExposition(broker, PulsarCollector(broker))
    families = {f.name: f for f in text_string_to_metric_families(await _scrape(exposition))}
    storage = {s.labels["topic"]: s for s in families["pulsar_storage_size"].samples}
    assert len(storage) == 50
    sample = storage["persistent://t/ns1/topic-7"]
    assert sample.labels == {"cluster": "c1", "namespace": "t/ns1", "topic": "persistent://t/ns1/topic-7"}
    assert sample.value == 2_000_007
    assert families["magnetar_topic_messages_in"].type == "counter"
    assert {s.labels["topic"]: s.value for s in families["magnetar_topic_messages_in"].samples}[
        "persistent://t/ns1/topic-7"] == 7
    backlogs = [(s.labels["topic"], s.labels["subscription"], s.value)
                for s in families["pulsar_subscription_back_log"].samples]
    assert len(backlogs) == sum(i % 3 for i in range(50))
    assert ("persistent://t/ns2/topic-5", "s1", 2) in backlogs
    assert len(families["pulsar_rate_in"].samples) == len(families["magnetar_topic_producers"].samples) == 50
    # Pulsar's counters: per topic, and the out ones per subscription too (one family each).
    assert {s.labels["topic"]: s.value for s in families["pulsar_in_messages"].samples}[
        "persistent://t/ns1/topic-7"] == 7
    assert families["pulsar_in_bytes"].type == "counter"
    out = [(s.labels["topic"], s.labels.get("subscription"), s.value) for s in families["pulsar_out_bytes"].samples]
    assert ("persistent://t/ns2/topic-5", None, 0) in out and ("persistent://t/ns2/topic-5", "s1", 1000) in out
    unacked = {(s.labels["topic"], s.labels["subscription"]): s.value
               for s in families["pulsar_subscription_unacked_messages"].samples}
    assert unacked[("persistent://t/ns2/topic-5", "s1")] == 4
    # The slowest subscription's mark-delete at 1:0 leaves 9 of the ledger's 10 entries: 900 of its 1000 bytes.
    assert {s.labels["topic"]: s.value for s in families["pulsar_storage_backlog_size"].samples}[
        "persistent://t/ns2/topic-5"] == 900
    entries = {(s.labels["topic"], s.labels["subscription"]): s.value
               for s in families["magnetar_subscription_backlog_entries"].samples}
    assert entries[("persistent://t/ns2/topic-5", "s1")] == 2


async def test_other_work_runs_while_many_topics_are_written():
    topics = [_topic(i) for i in range(3 * CHUNK_TOPICS)]
    broker = _broker(topics)
    exposition = TopicExposition(broker, PulsarCollector(broker))
    ran_during = []
    chunks = []

    async def other_work():
        ran_during.append(len(chunks))

    async for chunk in exposition.chunks():
        if not chunks:
            task = asyncio.get_running_loop().create_task(other_work())
        chunks.append(chunk)
    await task
    assert ran_during and ran_during[0] < len(chunks), "the scrape held the event loop to its end"
    # Unloaded topics are forgotten: their labels and last counters go at the next scrape.
    del broker.service.topics[str(topics[0].name)]
    await _scrape(exposition)
    assert str(topics[0].name) not in exposition._labels


async def test_the_broker_series_leave_in_one_chunk_per_collector_with_the_loop_running_between():
    """Several collectors visit every loaded topic: written as one chunk
    each, with the event loop running between two, instead of one stall."""
    from magnetar.admin.metrics import BrokerMetrics

    broker = SimpleNamespace(service=None, factory=None,
                             config=SimpleNamespace(cluster_name="c1", expose_topic_level_metrics_in_prometheus=False))
    metrics = BrokerMetrics(broker)
    ran = []
    chunks = []
    async for chunk in metrics.chunks():
        chunks.append((chunk, len(ran)))
        asyncio.get_running_loop().call_soon(ran.append, 1)
    assert len(chunks) == len(metrics.registries) >= 5
    assert [seen for _, seen in chunks] == list(range(len(chunks)))  # the loop ran before each next chunk
    families = {f.name for f in text_string_to_metric_families(b"".join(c for c, _ in chunks).decode())}
    assert {"magnetar_topics_loaded", "process_cpu_seconds", "pulsar_active_connections"} <= families
