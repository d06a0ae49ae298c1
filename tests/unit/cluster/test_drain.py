"""Draining a member: its bundles go to the others with PIP-307 moves, nothing comes back."""
from __future__ import annotations

from magnetar.broker.cluster.bundles import Bundle
from magnetar.broker.cluster.channel import FREE, OWNED
from magnetar.broker.cluster.drain import plan
from magnetar.broker.cluster.member import ClusterMember
from magnetar.broker.cluster.registry import BrokerInfo
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore
from tests.helpers import wait_until

from .fake_host import FakeHost


def _b(k: int) -> Bundle:
    return Bundle("public/default", k << 28, (k + 1) << 28)


def test_the_plan_spreads_an_idle_brokers_bundles_evenly():
    bundles = {_b(k): 0.0 for k in range(6)}
    out = plan(bundles, {"a": 0.0, "b": 0.0, "c": 0.0}, {"a": 1, "b": 0, "c": 0})
    held = {b: list(out.values()).count(b) + (1 if b == "a" else 0) for b in "abc"}
    assert sum(held.values()) == 7 and max(held.values()) - min(held.values()) <= 1


def test_the_plan_sends_the_heaviest_bundle_to_the_idlest_broker():
    out = plan({_b(0): 900.0, _b(1): 10.0, _b(2): 10.0}, {"busy": 500.0, "idle": 0.0}, {})
    assert out[_b(0)] == "idle"
    # The idle broker now carries 900 msg/s, more than the busy one: the small ones go there.
    assert out[_b(1)] == out[_b(2)] == "busy"


def test_the_plan_is_empty_without_brokers():
    assert plan({_b(0): 1.0}, {}, {}) == {}


def _member(store, n: int) -> tuple[ClusterMember, FakeHost]:
    host = FakeHost()
    info = BrokerInfo(f"broker-{n}:80{n}0", f"pulsar://broker-{n}:66{n}0", f"http://broker-{n}:80{n}0", "c")
    return ClusterMember(store, info, host, session_ttl_s=2.0, lookup_timeout_s=5.0), host


async def test_a_drain_moves_every_bundle_with_a_hand_over_and_takes_no_new_one():
    store = await MemoryMetadataStore.open()
    members = [_member(store, n) for n in range(3)]
    try:
        for m, _ in members:
            await m.start()
        a, host_a = members[0]
        names = [parse(f"persistent://public/default/t-{i}") for i in range(16)]
        for name in names:
            await a.lookup(name)
        await wait_until(lambda: a.channel.owned_by(a.broker_id))
        mine = set(a.channel.owned_by(a.broker_id))
        result = await a.drain(timeout_s=10.0)
        assert not a.channel.owned_by(a.broker_id)
        assert set(result.moved) == {str(b) for b in mine} and not result.failed
        assert set(result.moved.values()) <= {members[1][0].broker_id, members[2][0].broker_id}
        # Each bundle went by a hand-over naming its new owner (clients follow without a lookup).
        handed = {c[1]: c[2] for c in host_a.calls if c[0] == "hand_over"}
        assert set(handed) == mine and all(url is not None for url in handed.values())
        # Marked draining where every broker sees it; lookups of new bundles skip it.
        for m, _ in members:
            await wait_until(lambda m=m: m.registry.live[a.broker_id].draining)
        for i in range(16, 40):
            result = await members[i % 3][0].lookup(parse(f"persistent://public/default/n-{i}"))
            assert result.broker_id != a.broker_id
        await a.undrain()
        await wait_until(lambda: not members[1][0].registry.live[a.broker_id].draining)
    finally:
        for m, _ in members:
            await m.close()
        await store.close()


async def test_a_drain_with_nowhere_to_go_leaves_the_bundles_to_the_stops_release():
    store = await MemoryMetadataStore.open()
    alone, _ = _member(store, 0)
    try:
        await alone.start()
        await alone.lookup(parse("persistent://public/default/x"))
        bundle = alone.bundle_of(parse("persistent://public/default/x"))
        result = await alone.drain(timeout_s=5.0)
        assert result.failed == {str(bundle): "no other broker takes bundles"}
        assert alone.channel.get(bundle).state == OWNED
        alone.drain_on_stop = (5.0, 5.0)
        await alone.close()
        record = await store.get(f"/loadbalance/bundles/{bundle.namespace}/{bundle.range}")
        assert record is not None and FREE.encode() in record.value
    finally:
        await store.close()
