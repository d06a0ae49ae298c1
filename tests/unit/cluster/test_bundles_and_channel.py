"""Bundles and the bundle state channel on the MetadataStore contract."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.cluster import bundles
from magnetar.broker.cluster.channel import (ASSIGNING, FREE, OWNED, RELEASING, Channel, IllegalTransition,
                                             LostRace)
from magnetar.broker.cluster.channel import BundleState, parse_state
from magnetar.broker.topics.moving import MovingTopic
from magnetar.metadata import MemoryMetadataStore


def test_bundles_cover_the_hash_space_without_overlap():
    parts = bundles.split_namespace("public/default", 4)
    assert [b.range for b in parts] == ["0x00000000_0x40000000", "0x40000000_0x80000000",
                                        "0x80000000_0xc0000000", "0xc0000000_0xffffffff"]
    for h in (0, 0x3FFFFFFF, 0x40000000, 0xFFFFFFFF):
        assert sum(b.holds(h) for b in parts) == 1


def test_partitions_of_one_topic_spread_over_bundles():
    names = [f"persistent://public/default/t-partition-{i}" for i in range(12)]
    owners = {bundles.bundle_of(n, "public/default") for n in names}
    assert len(owners) >= 3


@pytest.mark.parametrize("text", ["", "0x10", "0x20_0x10", "zz_0x10", "0x0_0x1ffffffff"])
def test_malformed_bundle_ranges_are_refused(text):
    with pytest.raises(ValueError):
        bundles.parse_range("public/default", text)


def test_a_range_round_trips():
    for b in bundles.split_namespace("t/ns", 3):
        assert bundles.parse_range("t/ns", b.range) == b


@pytest.fixture
async def store():
    s = await MemoryMetadataStore.open()
    yield s
    await s.close()


async def test_only_legal_transitions_are_written(store):
    channel = Channel(store)
    await channel.start()
    b = bundles.split_namespace("public/default")[0]
    with pytest.raises(IllegalTransition):
        await channel.transition(b, OWNED, "a")  # Init -> Owned skips Assigning
    s = await channel.transition(b, ASSIGNING, "a")
    s = await channel.transition(b, OWNED, "a", expected=s)
    with pytest.raises(IllegalTransition):
        await channel.transition(b, ASSIGNING, "b", expected=s)
    s = await channel.transition(b, RELEASING, "a", "a", expected=s)
    s = await channel.transition(b, FREE, None, "a", expected=s)
    assert channel.get(b).state == FREE
    channel.close()


async def test_of_racing_assignments_exactly_one_wins(store):
    b = bundles.split_namespace("public/default")[1]
    channels = [Channel(store) for _ in range(2)]
    for c in channels:
        await c.start()
    for round_ in range(100):
        states = [c.get(b) for c in channels]
        assert states[0].version == states[1].version

        async def attempt(c, name, expected):
            try:
                await c.transition(b, ASSIGNING, name, expected=expected)
                return name
            except LostRace:
                return None

        winners = [w for w in await asyncio.gather(attempt(channels[0], "a", states[0]),
                                                    attempt(channels[1], "b", states[1])) if w]
        assert len(winners) == 1, f"round {round_}: {winners}"
        record = await store.get(f"/loadbalance/bundles/public/default/{b.range}")
        assert winners[0].encode() in record.value
        # Back to Free for the next round (Assigning -> Owned -> Releasing -> Free).
        s = await channels[0].refresh(f"/loadbalance/bundles/public/default/{b.range}")
        s = await channels[0].transition(b, OWNED, s.broker, expected=s)
        s = await channels[0].transition(b, RELEASING, s.broker, s.broker, expected=s)
        await channels[0].transition(b, FREE, None, s.broker, expected=s)
        for c in channels:
            await c.refresh(f"/loadbalance/bundles/public/default/{b.range}")
    for c in channels:
        c.close()


def test_an_assigning_record_carries_the_moving_topics_and_their_tails():
    """What the source names survives the record; an item this version cannot
    read is left out (its topic loads on first use), a bad tail is dropped."""
    state = BundleState(ASSIGNING, "b", "a", topics=(MovingTopic("persistent://t/n/x", (3, 7), 12),
                                                      MovingTopic("persistent://t/n/y")))
    assert parse_state(state.doc(), 4).topics == state.topics
    junk = b'{"state": "Assigning", "broker": "b", "source": "a", "topics": ["persistent://t/n/z", 5, {"x": 1},' \
           b' {"name": "persistent://t/n/w", "last": [1, "2"], "next_offset": 3}]}'
    assert parse_state(junk, 1).topics == (MovingTopic("persistent://t/n/z"), MovingTopic("persistent://t/n/w"))
    assert b"topics" not in BundleState(OWNED, "b").doc()
