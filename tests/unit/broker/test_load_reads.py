"""The metadata reads of loading topics (issue 41): a restart or a bundle
taken over loads thousands at once. A load reads its policies once (not
again for deduplication), the loads of one namespace that come at once share
the namespace's reads (``namespaces/load_policies.py``), and a managed
ledger's cursors are read by range. Counted on a real store (in memory, and
etcd) through the wrapper that counts read requests; a change made while a
topic loads is still applied to it."""
from __future__ import annotations

import asyncio

from magnetar.broker.namespaces import resources
from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore, MetadataError

from magnetar_harness.read_tap import ReadTap
from tests.helpers import wait_until

from .harness import close_service, make_service, producer, send_of

TOPICS = 200
CURSORS = 3


def _policy_reads(store: ReadTap) -> list[str]:
    return [k for k in store.read_keys if k.startswith((resources.POLICIES, resources.TOPIC_POLICIES))]


async def test_loading_a_namespace_s_topics_at_once_reads_its_policies_a_few_times(tmp_path, memory_or_etcd_store):
    """A restart's burst: every topic stored with data, cursors and its
    dedup snapshot. Before: 4 policy reads per topic (the load's 2, then 2
    for deduplication), the managed ledger's record twice (whether it
    exists, then the open's), and a listing plus a read per cursor."""
    store = ReadTap(memory_or_etcd_store)
    service = await make_service(tmp_path, store)
    await resources.create_namespace(store, "public/a", {"max_producers_per_topic": 9})
    names = [parse(f"persistent://public/a/t{i}") for i in range(TOPICS)]
    await resources.set_topic_policy(store, names[7], "max_producers", 3)
    await resources.set_topic_policy(store, names[8], "deduplicationEnabled", True)
    for name in names:
        topic = await service.get_topic(name)
        for c in range(CURSORS):
            await cursor_ops.create(topic, f"s{c}", None, earliest=True)
        p = producer(topic, 1)
        await topic.add_producer(p, None)
        await topic.publish(p, *send_of(p.name, 0))
    await close_service(service)

    # Fewer load slots than loads: the loads that wait for one were asked at once too.
    service = await make_service(tmp_path, store, max_concurrent_topic_loads=16)
    try:
        store.reads = 0
        store.read_keys.clear()
        topics = await asyncio.gather(*(service.get_topic(name) for name in names))
        policy_reads = _policy_reads(store)
        # public/a's record and its topics' documents in one range read, for
        # all of them (each asked before any read began).
        assert len(policy_reads) <= 4, policy_reads
        # The rest: the managed ledger's record (once: its recovery tells
        # whether it exists), its cursors in one range read, its dedup snapshot.
        assert store.reads - len(policy_reads) == 3 * TOPICS, sorted(set(store.read_keys))
        assert [t.max_producers for t in topics[6:9]] == [9, 3, 9]
        assert [t.dedup.enabled for t in topics[7:9]] == [False, True]
        assert all(len(t.subscriptions) == CURSORS for t in topics)
    finally:
        await close_service(service)


async def test_a_lone_load_reads_its_policies_once_after_it_asks(tmp_path):
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    try:
        await resources.create_namespace(store, "public/a")
        name = parse("persistent://public/a/t")
        await resources.set_topic_policy(store, name, "max_consumers", 4)
        store.reads = 0
        store.read_keys.clear()
        topic = await service.get_topic(name)
        assert topic.max_consumers == 4
        # Its namespace's record and its own document, once each (before: twice each).
        assert _policy_reads(store).count(f"{resources.POLICIES}/public/a") == 2  # one is creation's check
        assert len([k for k in store.read_keys if k.startswith(resources.TOPIC_POLICIES)]) == 1, store.read_keys
    finally:
        await close_service(service)


async def test_a_change_noted_while_a_topic_loads_is_applied_once_it_is_loaded(tmp_path):
    """The change lands after the load read its policies and before the topic
    is among the loaded ones, so the refresh the change starts passes it by
    (before: the topic kept the policies it was loaded with)."""
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    try:
        await resources.create_namespace(store, "public/a")
        name = parse("persistent://public/a/t")
        real_open = service.factory.open

        async def open_after_a_change(ml_name, **kwargs):
            await resources.set_policy(store, "public/a", "max_producers_per_topic", 7)
            await wait_until(lambda: service._policy_refresher is not None and service._policy_refresher.done(),
                             what="the change's refresh done (the topic not loaded yet)")
            return await real_open(ml_name, **kwargs)

        service.factory.open = open_after_a_change
        topic = await service.get_topic(name)
        await wait_until(lambda: topic.max_producers == 7, what="the change applied to the topic loaded meanwhile")
    finally:
        await close_service(service)


async def test_a_failed_read_fails_the_loads_it_answers_and_the_next_reads_afresh(tmp_path):
    store = ReadTap(MemoryMetadataStore())
    service = await make_service(tmp_path, store)
    try:
        await resources.create_namespace(store, "public/a")
        await resources.create_namespace(store, "public/b")
        for name in ("persistent://public/a/t0", "persistent://public/a/t1", "persistent://public/b/t"):
            await service.unload(await service.get_topic(parse(name)))  # stored, not loaded
        store.failing = f"{resources.TOPIC_POLICIES}/public/a"
        outcomes = await asyncio.gather(*(service.get_topic(parse(n)) for n in (
            "persistent://public/a/t0", "persistent://public/a/t1", "persistent://public/b/t")),
            return_exceptions=True)
        assert [type(o) for o in outcomes[:2]] == [MetadataError, MetadataError], outcomes
        assert outcomes[2].name == parse("persistent://public/b/t")  # another namespace's read is its own
        store.failing = None
        assert (await service.get_topic(parse("persistent://public/a/t0"))).name.local == "t0"
    finally:
        await close_service(service)
