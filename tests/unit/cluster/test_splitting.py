"""Splitting bundles: the cut, the layout, and three members on one store."""
from __future__ import annotations

import pytest

from magnetar.broker.cluster import bundles
from magnetar.broker.cluster.bundles import FULL, Bundle, split_point
from magnetar.broker.cluster.channel import DELETED, FREE, OWNED, SPLITTING, LostRace
from magnetar.broker.cluster.layout import Layouts
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore

from tests.helpers import wait_until

from .test_members import Cluster, Member

NS = "public/default"


def test_range_split_cuts_in_the_middle_and_topic_count_split_at_the_median():
    b = Bundle(NS, 0, 1 << 30)
    assert split_point(b) == 1 << 29
    topics = [f"persistent://{NS}/t{i}" for i in range(400)]
    inside = [t for t in topics if b.holds(bundles.topic_hash(t))]
    at = split_point(b, bundles.TOPIC_COUNT_EQUALLY_DIVIDE, topics)
    low, high = b.split(at)
    n_low = sum(low.holds(bundles.topic_hash(t)) for t in inside)
    assert abs(n_low - (len(inside) - n_low)) <= 1


@pytest.mark.parametrize("bundle, algorithm, topics", [
    (Bundle(NS, 5, 6), bundles.RANGE_EQUALLY_DIVIDE, []),            # one hash wide
    (Bundle(NS, 0, FULL), bundles.TOPIC_COUNT_EQUALLY_DIVIDE, []),   # no topic to divide
    (Bundle(NS, 0, FULL), "flow_or_qps_equally_divide", []),         # not implemented
])
def test_impossible_splits_are_refused_with_a_reason(bundle, algorithm, topics):
    with pytest.raises(ValueError):
        split_point(bundle, algorithm, topics)


def test_a_cut_outside_the_bundle_is_refused():
    with pytest.raises(ValueError):
        Bundle(NS, 10, 20).split(20)


async def test_a_layout_gets_finer_and_a_stale_replace_loses():
    store = await MemoryMetadataStore.open()
    try:
        one, two = Layouts(store, 4), Layouts(store, 4)
        await one.start()
        await two.start()
        first = one.bundles(NS)[0]
        assert len(two.bundles(NS)) == 4
        new = await one.replace(first, first.split(split_point(first)))
        assert len(new) == 5 and first not in new
        await wait_until(lambda: len(two.bundles(NS)) == 5, what="the watch to bring the new layout")
        with pytest.raises(ValueError):
            await two.replace(first, first.split(split_point(first)))  # it is gone already
        topic = f"persistent://{NS}/somewhere"
        assert one.bundle_of(topic, NS) == two.bundle_of(topic, NS)
        assert one.bundle_of(topic, NS).holds(bundles.topic_hash(topic))
        one.close()
        two.close()
    finally:
        await store.close()


async def test_the_owner_splits_a_bundle_and_keeps_both_halves_without_unloading():
    async with Cluster() as (store, members):
        name = parse(f"persistent://{NS}/split-me")
        owner_id = (await members[1].member.lookup(name)).broker_id
        owner = next(m for m in members if m.member.broker_id == owner_id)
        bundle = owner.member.bundle_of(name)
        asker = next(m for m in members if m is not owner)  # a split can be asked of any broker
        after = await asker.member.split(bundle, split_point(bundle))
        halves = bundle.split(split_point(bundle))
        assert set(halves) <= set(after) and bundle not in after
        for half in halves:
            state = asker.member.channel.get(half)
            assert (state.state, state.broker) == (OWNED, owner_id)
        assert asker.member.channel.get(bundle).state == DELETED
        assert not owner.unloaded, "the owner's topics must stay loaded through a split"
        # Every member now places the topic in a half, owned by the same broker.
        for m in members:
            await wait_until(lambda m=m: m.member.bundle_of(name) in halves, what="every layout copy")
            assert (await m.member.lookup(name)).broker_id == owner_id


async def test_a_member_with_a_stale_layout_finds_the_halves_through_the_deleted_bundle():
    async with Cluster() as (store, members):
        name = parse(f"persistent://{NS}/stale")
        owner_id = (await members[0].member.lookup(name)).broker_id
        late = next(m for m in members if m.member.broker_id != owner_id)
        bundle = late.member.bundle_of(name)
        late.member.layouts.close()  # it hears of no layout change from now on
        requester = next(m for m in members if m is not late)  # its copy is current
        await requester.member.split(bundle, split_point(bundle))
        await wait_until(lambda: late.member.channel.get(bundle).state == DELETED, what="the late member to see Deleted")
        assert late.member.bundle_of(name) == bundle  # still the old copy
        result = await late.member.lookup(name)
        assert result.broker_id == owner_id
        assert late.member.bundle_of(name) != bundle


async def test_a_split_of_an_unowned_or_racing_bundle_is_refused():
    async with Cluster() as (store, members):
        m = members[0].member
        unowned = m.bundles(NS)[3]
        with pytest.raises(ValueError):
            await m.split(unowned, split_point(unowned))
        name = parse(f"persistent://{NS}/race")
        await m.lookup(name)
        bundle = m.bundle_of(name)
        state = m.channel.get(bundle)
        await m.channel.transition(bundle, SPLITTING, state.broker, state.broker, expected=state,
                                   split_at=split_point(bundle))
        with pytest.raises((ValueError, LostRace)):
            await members[1].member.split(bundle, split_point(bundle))


async def test_the_leader_finishes_or_undoes_the_split_of_a_dead_owner():
    async with Cluster() as (store, members):
        name = parse(f"persistent://{NS}/orphan")
        owner_id = (await members[0].member.lookup(name)).broker_id
        owner = next(m for m in members if m.member.broker_id == owner_id)
        bundle = owner.member.bundle_of(name)
        # The owner dies just as the split is asked: nobody carries it out.
        owner.member.closing = True
        state = owner.member.channel.get(bundle)
        await owner.member.channel.transition(bundle, SPLITTING, owner_id, owner_id, expected=state,
                                              split_at=split_point(bundle))
        await owner.member.session.close()
        others = [m for m in members if m is not owner]
        await wait_until(lambda: others[0].member.channel.get(bundle).state == FREE, timeout=15,
                         what="the leader to free the bundle of a split that never happened")
        # The bundle is whole again and served by a live broker.
        result = await others[0].member.lookup(name)
        assert result.broker_id != owner_id


async def test_an_owner_back_within_its_session_carries_out_the_split_it_was_asked_to_do():
    """The split's twin of the chaos harness's move-kill-source finding: an
    owner killed as a split was asked and restarted within its session TTL
    is never seen leaving, so the leader does not clean up; without the
    restarted owner carrying it out, the bundle stayed Splitting for good,
    its topics unserved."""
    async with Cluster() as (store, members):
        name = parse(f"persistent://{NS}/split-then-restart")
        owner_id = (await members[0].member.lookup(name)).broker_id
        index = next(i for i, m in enumerate(members) if m.member.broker_id == owner_id)
        owner = members[index]
        await wait_until(lambda: owner.member.owns(name), what="owned")
        bundle = owner.member.bundle_of(name)
        owner.member.closing = True
        owner.member._monitor.cancel()
        owner.member.channel._listeners.clear()
        await owner.member.leader.stop()
        state = owner.member.channel.get(bundle)
        await owner.member.channel.transition(bundle, SPLITTING, owner_id, owner_id, expected=state,
                                              split_at=split_point(bundle))
        reborn = Member(store, index)
        members[index] = reborn
        await reborn.member.start()
        other = next(m for m in members if m is not reborn)
        await wait_until(lambda: other.member.channel.get(bundle).state == DELETED, timeout=10,
                         what=f"the split finished (the bundle is {other.member.channel.get(bundle)})")
        for half in bundle.split(split_point(bundle)):
            state = other.member.channel.get(half)
            assert (state.state, state.broker) == (OWNED, owner_id)
        assert (await other.member.lookup(name)).broker_id == owner_id
        await owner.member.session.close()


async def test_a_namespace_without_a_layout_record_is_cut_once_not_at_each_placement(monkeypatch):
    """A broker's load report places every loaded topic every 5 s: at 10,000
    topics, cutting the default layout anew for each one stalled the event
    loop some 30 ms each time (bench/send_series.py's loop lag)."""
    from magnetar.broker.cluster import layout as layout_module
    cuts = []
    real = layout_module.split_namespace
    monkeypatch.setattr(layout_module, "split_namespace", lambda *a: cuts.append(a) or real(*a))
    store = await MemoryMetadataStore.open()
    try:
        layouts = Layouts(store, 4)
        await layouts.start()
        topics = [f"persistent://{NS}/t-{i}" for i in range(1000)]
        placed = [layouts.bundle_of(t, NS) for t in topics]
        assert len(cuts) == 1
        assert all(b.holds(bundles.topic_hash(t)) for b, t in zip(placed, topics)) and len(set(placed)) == 4
        first = placed[0]
        await layouts.replace(first, first.split(split_point(first)))  # a record now: it wins over the default
        await wait_until(lambda: len(layouts.bundles(NS)) == 5, what="the watch to bring the new layout")
        assert layouts.bundle_of(topics[0], NS) in first.split(split_point(first))
        layouts.close()
    finally:
        await store.close()
