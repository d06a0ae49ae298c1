"""A bundle step lost to the metadata store is not lost for good.

A bundle Assigning to a live broker is taken only by that broker, and one
Releasing from a live broker is passed on only by it: the leader rescued
the bundles of gone brokers alone. So a take or a pass-on whose write
failed in the store, or a change whose read failed, left the bundle in
flight for good, and every lookup waited for it in vain. (Looked for after
a hosts chaos run in CI, seed 728, whose final read got no lookup answer
from any broker for 30 s right after an etcd member was cut off.)
"""
from __future__ import annotations

from magnetar.broker.cluster.channel import ASSIGNING, OWNED, ROOT
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore
from magnetar.metadata.store import MetadataError
from tests.helpers import wait_until

from .test_members import Member


class StoreLink:
    """One broker's way to the shared store. ``failing_reads`` /
    ``failing_writes`` of bundle records fail as etcd's do when out of reach
    (a write failed so may or may not have happened: ``writes_happen``);
    ``write_filter(value)`` picks which writes."""

    def __init__(self, store: MemoryMetadataStore) -> None:
        self._store = store
        self.failing_reads = 0
        self.failing_writes = 0
        self.writes_happen = False
        self.write_filter = lambda value: True
        self.refused_writes = 0

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def get(self, key):
        if self.failing_reads and key.startswith(ROOT):
            self.failing_reads -= 1
            raise MetadataError("etcd unreachable: injected")
        return await self._store.get(key)

    async def put(self, key, value, expected_version=None, *, session=None):
        if self.failing_writes and key.startswith(ROOT) and self.write_filter(bytes(value)):
            self.failing_writes -= 1
            self.refused_writes += 1
            if self.writes_happen:
                await self._store.put(key, value, expected_version, session=session)
            raise MetadataError("etcd unreachable: injected (the write may or may not have happened)")
        return await self._store.put(key, value, expected_version, session=session)


class LinkedCluster:
    """Three members, each through its own :class:`StoreLink`; member 0
    drains, so lookups it answers assign bundles to the other two."""

    async def __aenter__(self):
        self.store = await MemoryMetadataStore.open()
        self.links = [StoreLink(self.store) for _ in range(3)]
        self.members = [Member(link, n) for n, link in enumerate(self.links)]
        for m in self.members:
            await m.member.start()
        await wait_until(lambda: all(len(m.member.registry.live) == 3 for m in self.members),
                         what="every broker registered")
        await self.members[0].member.mark_draining(True)
        await wait_until(lambda: all(len(m.member.registry.candidates()) == 2 for m in self.members),
                         what="member 0 seen draining")
        return self

    async def __aexit__(self, *exc):
        for m in self.members:
            await m.member.close()
        await self.store.close()


async def test_a_take_whose_write_failed_is_tried_again():
    async with LinkedCluster() as c:
        for link in c.links[1:]:
            link.failing_writes = 3
            link.write_filter = lambda value: b'"Owned"' in value
        name = parse("persistent://public/default/take-fails")
        # Without the retry the bundle stays Assigning and this raises
        # ServiceNotReady after the lookup timeout (5 s here).
        result = await c.members[0].member.lookup(name)
        assert result.broker_id != c.members[0].member.broker_id
        assert sum(link.refused_writes for link in c.links) == 3
        owner = next(m for m in c.members if m.member.broker_id == result.broker_id)
        await wait_until(lambda: owner.member.owns(name), what="the owner serving the topic")


async def test_a_take_whose_answer_was_lost_is_not_written_again():
    async with LinkedCluster() as c:
        for link in c.links[1:]:
            link.failing_writes = 1
            link.writes_happen = True
            link.write_filter = lambda value: b'"Owned"' in value
        name = parse("persistent://public/default/take-answer-lost")
        result = await c.members[0].member.lookup(name)
        owner = next(m for m in c.members if m.member.broker_id == result.broker_id)
        await wait_until(lambda: owner.member.owns(name), what="the owner serving the topic")
        assert sum(link.refused_writes for link in c.links) == 1
        assert c.members[0].member.channel.get(owner.member.bundle_of(name)).state == OWNED


async def test_an_assignment_whose_read_failed_is_read_again():
    async with LinkedCluster() as c:
        for link in c.links[1:]:
            link.failing_reads = 2  # the watch's read of the Assigning record, and its first retry
        name = parse("persistent://public/default/read-fails")
        # Without the re-read the assigned broker never sees it is Assigning
        # to it: ServiceNotReady after the lookup timeout.
        result = await c.members[0].member.lookup(name)
        assert result.broker_id != c.members[0].member.broker_id


async def test_a_pass_on_whose_write_failed_is_tried_again():
    async with LinkedCluster() as c:
        name = parse("persistent://public/default/pass-on-fails")
        owner_id = (await c.members[0].member.lookup(name)).broker_id
        owner = next(m for m in c.members if m.member.broker_id == owner_id)
        dest = next(m for m in c.members[1:] if m is not owner)
        await wait_until(lambda: owner.member.owns(name), what="owned")
        bundle = owner.member.bundle_of(name)
        owner_link = c.links[c.members.index(owner)]
        owner_link.failing_writes = 2
        owner_link.write_filter = lambda value: b'"Assigning"' in value
        assert await c.members[0].member.unload(bundle, dest.member.broker_id, timeout=8.0) == dest.member.broker_id
        assert owner_link.refused_writes == 2


async def test_the_leader_assigns_again_a_bundle_whose_take_was_lost():
    async with LinkedCluster() as c:
        for m in c.members:
            m.member.leader.inflight_timeout_s = 0.5
        name = parse("persistent://public/default/take-lost")
        bundle = c.members[0].member.bundle_of(name)
        dropped = []
        for m in c.members[1:]:
            take = m.member._take

            async def drop_first(b, state, take=take):
                if not dropped:  # the first take vanishes (no error, nothing written)
                    dropped.append(state.broker)
                    return
                await take(b, state)

            m.member._take = drop_first
        # The lookup's own wait ends in ServiceNotReady after 5 s (its
        # deadline) unless the leader assigns the bundle again.
        result = await c.members[0].member.lookup(name)
        assert dropped and result.broker_id != dropped[0]
        state = c.members[0].member.channel.get(bundle)
        assert (state.state, state.broker) == (OWNED, result.broker_id)


async def test_the_leader_leaves_a_bundle_in_flight_alone_within_the_timeout():
    async with LinkedCluster() as c:
        name = parse("persistent://public/default/slow-take")
        bundle = c.members[0].member.bundle_of(name)
        for m in c.members[1:]:
            async def never(b, state):
                return
            m.member._take = never
        asker = c.members[0].member
        target = "broker-1:8010"
        state = asker.channel.get(bundle)
        await asker.channel.transition(bundle, ASSIGNING, target, expected=state)
        leader = next(m.member.leader for m in c.members if m.member.leader.is_leader)
        for _ in range(3):
            assert await leader.sweep() == 0
        assert asker.channel.get(bundle).state == ASSIGNING
