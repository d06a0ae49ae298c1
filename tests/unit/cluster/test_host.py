"""The seam between a cluster member and the broker service (``cluster/host.py``).

A member drives a move (PIP-307) through its host alone: these tests run
members against :class:`.fake_host.FakeHost` and check the calls, and check
that the real service offers every call of the seam.
"""
from __future__ import annotations

import inspect

from magnetar.broker.cluster.channel import ASSIGNING, OWNED
from magnetar.broker.cluster.host import BundleHost
from magnetar.broker.cluster.member import ClusterMember
from magnetar.broker.cluster.registry import BrokerInfo
from magnetar.broker.server.service import BrokerService
from magnetar.broker.topic_name import parse
from magnetar.broker.topics.moving import MovingTopic
from magnetar.metadata import MemoryMetadataStore

from .fake_host import FakeHost
from .test_members import wait_until


def _member(store, n: int) -> ClusterMember:
    info = BrokerInfo(f"broker-{n}:80{n}0", f"pulsar://broker-{n}:66{n}0", f"http://broker-{n}:80{n}0", "c",
                      service_url_tls=f"pulsar+ssl://broker-{n}:66{n}1")
    return ClusterMember(store, info, FakeHost(), session_ttl_s=2.0, lookup_timeout_s=5.0)


async def test_a_move_releases_on_the_source_then_hands_its_clients_to_the_destination():
    store = await MemoryMetadataStore.open()
    members = [_member(store, n) for n in range(2)]
    for m in members:
        await m.start()
    try:
        name = parse("persistent://public/default/moving")
        owner_id = (await members[0].lookup(name)).broker_id
        source = next(m for m in members if m.broker_id == owner_id)
        dest = next(m for m in members if m is not source)
        await wait_until(lambda: source.owns(name) and len(dest.registry.live) == 2, what="owned, both live")
        bundle = source.bundle_of(name)

        assert await source.unload(bundle, dest.broker_id) == dest.broker_id

        await wait_until(lambda: len(source.host.calls) >= 2, what="the handover")
        assert source.host.calls == [
            ("release", bundle),
            ("hand_over", bundle, (dest.info.service_url, dest.info.service_url_tls)),
        ]
        assert not source.host.holds_released(bundle)
        # No topic was loaded on the source: nothing to prepare, only the arrival.
        assert dest.host.calls == [("arrived", bundle)]
        assert dest.channel.get(bundle).state == OWNED and dest.owns(name)
    finally:
        for m in members:
            await m.close()
        await store.close()


async def test_the_destination_loads_the_released_topics_before_it_takes_the_bundle():
    """The source names the topics it released in the Assigning record; the
    destination prepares them while the bundle is still Assigning to it, and
    only then takes it (so the clients handed over find them loaded)."""
    store = await MemoryMetadataStore.open()
    members = [_member(store, n) for n in range(2)]
    for m in members:
        await m.start()
    try:
        name = parse("persistent://public/default/moving-loaded")
        owner_id = (await members[0].lookup(name)).broker_id
        source = next(m for m in members if m.broker_id == owner_id)
        dest = next(m for m in members if m is not source)
        await wait_until(lambda: source.owns(name) and len(dest.registry.live) == 2, what="owned, both live")
        bundle = source.bundle_of(name)
        moving = [MovingTopic(str(name), (3, 41), 97), MovingTopic("persistent://public/default/other")]
        source.host.loaded[bundle] = moving
        dest.host.owner_of = lambda b: (dest.channel.get(b).state, dest.channel.get(b).broker)

        assert await source.unload(bundle, dest.broker_id) == dest.broker_id

        await wait_until(lambda: len(source.host.calls) >= 2, what="the handover")
        assert dest.host.calls == [
            ("prepare", bundle, moving, (ASSIGNING, dest.broker_id)),
            ("arrived", bundle),
        ]
        assert source.host.calls[-1][0] == "hand_over"
    finally:
        for m in members:
            await m.close()
        await store.close()


async def test_a_source_without_handovers_unloads_instead():
    store = await MemoryMetadataStore.open()
    members = [_member(store, n) for n in range(2)]
    members[0].multi_phase = members[1].multi_phase = False
    for m in members:
        await m.start()
    try:
        name = parse("persistent://public/default/moving-the-old-way")
        owner_id = (await members[0].lookup(name)).broker_id
        source = next(m for m in members if m.broker_id == owner_id)
        dest = next(m for m in members if m is not source)
        await wait_until(lambda: source.owns(name) and len(dest.registry.live) == 2, what="owned, both live")
        bundle = source.bundle_of(name)
        await source.unload(bundle, dest.broker_id)
        assert ("unload", bundle) in source.host.calls
        assert not [c for c in source.host.calls if c[0] in ("release", "hand_over")]
    finally:
        for m in members:
            await m.close()
        await store.close()


def test_the_broker_service_offers_every_call_of_the_seam():
    """What a member calls on ``BrokerService`` is what ``BundleHost`` says:
    the same methods, parameters and sync/async kind."""
    wanted = {n: f for n, f in vars(BundleHost).items() if not n.startswith("_") and callable(f)}
    assert wanted, "BundleHost names no calls"
    for name, proto in wanted.items():
        real = getattr(BrokerService, name, None)
        assert real is not None, f"BrokerService lacks {name}"
        assert list(inspect.signature(real).parameters) == list(inspect.signature(proto).parameters), name
        assert inspect.iscoroutinefunction(real) == inspect.iscoroutinefunction(proto), name
