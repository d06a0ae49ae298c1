"""The metadata reads of the broker's periodic rounds (issue 41): message
expiry, the refresh after a policy change and geo-replication's pass read a
namespace's policies a namespace at a time, so a round costs reads by
namespaces, not by loaded topics. Counted on a real in-memory store through
a wrapper that counts the read requests a store answers (``children_records``
is one request: one etcd range per page); the policies the rounds apply are
the ones read one topic at a time."""
from __future__ import annotations

import logging
import time
from types import SimpleNamespace

from magnetar.broker.namespaces import policy_keys, resources
from magnetar.broker.namespaces.applied import applied_by_namespace, applied_policies
from magnetar.broker.policies import backlog_quota
from magnetar.broker.policies.expiry import MessageExpiry
from magnetar.broker.policies.inactive import InactiveTopics
from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.topic_name import parse
from magnetar.broker.topics.stats_sampling import sample_all
from magnetar.metadata import MemoryMetadataStore, MetadataStore

from magnetar_harness.read_tap import ReadTap
from tests.helpers import wait_until

from .harness import close_service, make_service, producer, send_of

TOPICS_PER_NAMESPACE = 1_000
NAMESPACES = ("public/a", "public/b")


async def _namespaces(store: MetadataStore) -> None:
    await resources.bootstrap(store, "standalone", {})
    await resources.create_namespace(store, "public/a", {"message_ttl_in_seconds": 3600})
    await resources.create_namespace(store, "public/b")


def _names(count: int = TOPICS_PER_NAMESPACE) -> list:
    return [parse(f"persistent://{ns}/t{i}") for ns in NAMESPACES for i in range(count)]


async def test_an_expiry_round_reads_by_namespace_not_by_topic():
    store = ReadTap(MemoryMetadataStore())
    await _namespaces(store)
    await resources.set_topic_policy(store, parse("persistent://public/b/t7"), "message_ttl_in_seconds", 60)
    topics = {str(n): SimpleNamespace(name=n, closed=False, subscriptions={}) for n in _names()}
    expiry = MessageExpiry(SimpleNamespace(topics=topics), store, 60.0)
    store.reads = 0
    await expiry.check_all()
    # Per namespace: its policies, one range read of its topics' own. Two reads per topic before.
    assert store.reads == 2 * len(NAMESPACES), store.read_keys


async def test_the_policies_read_by_namespace_are_those_read_topic_by_topic(monkeypatch, memory_or_etcd_store):
    """Own policies win (a partition's are its partitioned topic's, names
    with characters quoted in keys too), a namespace without its record gets
    the defaults; both ways of reading topic documents (a read each for few
    topics, pages of range reads for many) agree with :func:`applied_policies`,
    on etcd too (its range reads by page)."""
    store = ReadTap(memory_or_etcd_store)
    await _namespaces(store)
    names = _names(30) + [parse("persistent://public/a/p-partition-0"), parse("persistent://public/a/p-partition-1"),
                          parse("persistent://public/b/odd:name=x"), parse("persistent://public/gone/t0")]
    for i, name in enumerate(names[::4]):
        await resources.set_topic_policy(store, name, "message_ttl_in_seconds", 10 + i)
        await resources.set_topic_policy(store, name, "max_producers", i)
    await resources.set_topic_policy(store, parse("persistent://public/a/p"), "message_ttl_in_seconds", 5)
    await resources.set_topic_policy(store, parse("persistent://public/b/odd:name=x"), "deduplicationEnabled", True)
    expected = {name: await applied_policies(store, name) for name in names}
    assert expected[parse("persistent://public/a/p-partition-1")]["message_ttl_in_seconds"] == 5
    for page in (policy_keys.TOPIC_POLICIES_PAGE, 3):  # many pages of a namespace's documents too
        monkeypatch.setattr(policy_keys, "TOPIC_POLICIES_PAGE", page)
        got = {}
        store.reads = 0
        store.read_keys.clear()
        async for _, applied in applied_by_namespace(store, names):
            got.update(applied)
        assert got == expected
        # Each namespace's record; a: 9 documents, b: 8, in one page or pages of 3 (the last one
        # not full); gone: one topic, one read of its document.
        assert store.reads == (3 + 1 + 1 + 1 if page > 3 else 3 + 4 + 3 + 1), store.read_keys
    few = [parse("persistent://public/b/odd:name=x"), parse("persistent://public/a/t0")]
    got = {}
    async for _, applied in applied_by_namespace(store, few):
        got.update(applied)
    assert got == {name: expected[name] for name in few}


async def _topic_with_backlog(service, name: str):
    topic = await service.get_topic(parse(name))
    await cursor_ops.create(topic, "s", None, earliest=True)
    p = producer(topic, 1)
    await topic.add_producer(p, None)
    for seq in range(3):
        await topic.publish(p, *send_of(p.name, seq))
    return topic


async def test_a_topic_level_ttl_set_after_a_round_is_applied_at_the_next(tmp_path, monkeypatch, caplog):
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    try:
        await resources.create_namespace(store, "public/slow", {"message_ttl_in_seconds": 86_400})
        await resources.create_namespace(store, "public/other", {"message_ttl_in_seconds": 60})
        own = await _topic_with_backlog(service, "persistent://public/slow/own")
        sibling = await _topic_with_backlog(service, "persistent://public/slow/sibling")
        other = await _topic_with_backlog(service, "persistent://public/other/t")
        later = int(time.time() * 1000) + 3_600_000
        real_expire = cursor_ops.expire
        # An hour from now: older than 60 s and a topic's 600 s, younger than the namespace's day.
        monkeypatch.setattr(cursor_ops, "expire", lambda sub, ttl, now_ms=None: real_expire(sub, ttl, later))
        expiry = MessageExpiry(service, store, 60.0)
        store.failing = f"{resources.POLICIES}/public/other"
        with caplog.at_level(logging.WARNING):
            assert await expiry.check_all() == 0  # the namespace's day; other's read fails
        assert "public/other" in caplog.text
        assert other.subscriptions["s"].backlog() == 3  # its turn is the next round
        await resources.set_topic_policy(store, own.name, "message_ttl_in_seconds", 600)
        store.failing = None
        assert await expiry.check_all() == 6  # own's by its own TTL, other's now its read works
        assert own.subscriptions["s"].backlog() == 0
        assert sibling.subscriptions["s"].backlog() == 3  # still the namespace's day
        assert other.subscriptions["s"].backlog() == 0
    finally:
        await close_service(service)


async def test_the_refresh_after_a_policy_change_reads_only_what_changed(tmp_path):
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    try:
        await resources.create_namespace(store, "public/a")
        await resources.create_namespace(store, "public/b")
        topics = [await service.get_topic(parse(f"persistent://{ns}/t{i}")) for ns in NAMESPACES for i in range(100)]
        a_topics = [t for t in topics if t.name.namespace_name == "public/a"]
        store.reads = 0
        store.read_keys.clear()
        await resources.set_policy(store, "public/a", "max_producers_per_topic", 7)
        await wait_until(lambda: all(t.max_producers == 7 for t in a_topics), what="the namespace's change applied")
        await wait_until(lambda: service._policy_refresher.done(), what="the refresh done")
        # The set's own read-modify-write, then public/a once and its topics' documents in one range read.
        assert store.reads <= 3, store.read_keys
        assert not [k for k in store.read_keys if "public/b" in k]
        assert all(t.max_producers is None for t in topics if t not in a_topics)
        # A topic's own change reads the namespace and that topic's document.
        store.reads = 0
        target = a_topics[5]
        await resources.set_topic_policy(store, target.name, "max_producers", 3)
        await wait_until(lambda: target.max_producers == 3, what="the topic's change applied")
        await wait_until(lambda: service._policy_refresher.done(), what="the refresh done")
        assert store.reads <= 3, store.read_keys  # the set's read, then 2
        assert all(t.max_producers == 7 for t in a_topics if t is not target)
    finally:
        await close_service(service)


def test_a_change_concerns_its_namespace_its_topic_or_no_topic():
    assert policy_keys.changed_policies("/admin/policies/public") is None  # a tenant's roles and clusters
    assert policy_keys.changed_policies("/admin/policies/public/a") == ("public/a", None)
    assert policy_keys.changed_policies("/admin/topic-policies/public/a/odd%3Aname%3Dx") == ("public/a", "odd:name=x")
    assert policy_keys.changed_policies("/admin/topic-policies/public/a") == ("public/a", None)
    assert policy_keys.changed_policies("/admin/policies") == policy_keys.EVERY_TOPIC
    assert policy_keys.changed_policies("/admin/topic-policies/public") == policy_keys.EVERY_TOPIC


async def test_the_quota_inactive_and_stats_rounds_read_no_metadata(tmp_path):
    """They act on what the topic holds (its quotas came with its policies,
    at load and on a change): nothing to batch."""
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store, broker_delete_inactive_topics_enabled=True, topic_idle_unload_s=1.0)
    try:
        quota = {"destination_storage": {"limitSize": 1, "limitTime": -1, "policy": "producer_request_hold"}}
        await resources.create_namespace(store, "public/a", {"backlog_quota_map": quota})
        topics = [await _topic_with_backlog(service, f"persistent://public/a/t{i}") for i in range(20)]
        assert all(t.backlog_quotas for t in topics)
        store.reads = 0
        await backlog_quota.check_all(service)
        assert all(t.quota_block is not None for t in topics)
        rounds = InactiveTopics(service, service.config)
        await rounds.round(now=0.0)
        await sample_all(service.topics)
        assert store.reads == 0, store.read_keys
    finally:
        await close_service(service)


async def test_geo_replications_passes_read_by_namespace_and_still_load_and_reconcile(tmp_path):
    """The pass over loaded topics reads by namespace; the loading pass reads
    the tenants' namespaces by range and lists only replicated namespaces'
    topics (it walked every stored managed ledger, cursors included), and
    still loads a stored topic of a replicated namespace, not another's."""
    from magnetar.replication.manager import GeoReplication

    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    geo = GeoReplication(service, service.config)
    try:
        here = service.config.cluster_name
        await resources.create_namespace(store, "public/replicated", {"replication_clusters": [here, "elsewhere"]})
        await resources.create_namespace(store, "public/local")
        names = [f"persistent://public/{ns}/t{i}" for ns in ("replicated", "local") for i in range(20)]
        for name in names:
            await service.get_topic(parse(name))
        await service.unload(service.topics["persistent://public/replicated/t0"])
        await service.unload(service.topics["persistent://public/local/t0"])
        await geo._resume()
        assert "persistent://public/replicated/t0" in service.topics  # loaded again: replication resumes
        assert "persistent://public/local/t0" not in service.topics
        store.reads = 0
        store.read_keys.clear()
        await geo._resume()  # nothing left to load
        # The tenants, public's namespaces in one range, the replicated namespace's topic names.
        assert store.read_keys == ["/admin/policies", "/admin/policies/public",
                                   "/managed-ledgers/public/replicated/persistent"]
        for topic in service.topics.values():  # replicating already: what the pass reads is counted
            topic.replicators["elsewhere"] = None
            topic.marker_handler = True
        store.reads = 0
        await geo._reconcile_all()
        assert store.reads == 2 * 2, store.read_keys  # each namespace: its record, its topics' documents
    finally:
        for topic in service.topics.values():
            topic.replicators.clear()
            topic.marker_handler = None
        await geo.clusters.close()
        await close_service(service)
