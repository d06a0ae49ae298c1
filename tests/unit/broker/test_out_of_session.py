"""A cluster broker that lost its metadata session hands out none of its
loaded topics, even before its unload of every topic (which waits on the
store) reaches them: its bundles may be another broker's by now.

Found by reading the code after the chaos harness's etcd partitions (seed
27 in docs/reliability.md): until its turn in the unload a loaded topic
still took new producers."""
from __future__ import annotations

import asyncio
import time

import pytest

from magnetar.broker.cluster.member import ClusterMember
from magnetar.broker.cluster.registry import BrokerInfo
from magnetar.broker.errors import ServiceNotReady
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore

from ..cluster.fake_host import FakeHost
from .harness import close_service, make_service


async def test_a_broker_out_of_session_refuses_its_loaded_topics_until_it_is_back(tmp_path):
    store = await MemoryMetadataStore.open()
    service = await make_service(tmp_path, store)
    unloading = asyncio.Event()
    release = asyncio.Event()

    class SlowHost(FakeHost):
        async def unload_all(self):  # the store is out of reach: each topic's final writes wait
            unloading.set()
            await release.wait()

    info = BrokerInfo("broker-0:8080", "pulsar://broker-0:6650", "http://broker-0:8080", "c")
    member = ClusterMember(store, info, SlowHost(), multi_phase=False, session_ttl_s=2.0, lookup_timeout_s=5.0)
    await member.start()
    service.cluster = member
    name = parse("persistent://public/default/out-of-session")
    try:
        await member.lookup(name)
        topic = await service.get_topic(name)
        assert await service.get_topic(name) is topic  # owned and in session: served
        await member.session.close()  # its lease is gone
        await asyncio.wait_for(unloading.wait(), 10)
        assert not member.serving
        with pytest.raises(ServiceNotReady, match="lost its metadata session"):
            await service.get_topic(name)
        release.set()
        deadline = time.monotonic() + 10
        while not member.serving:  # joins again with a new session
            assert time.monotonic() < deadline, "never joined again"
            await asyncio.sleep(0.02)
    finally:
        release.set()
        await member.close()
        service.cluster = None
        await close_service(service)
        await store.close()
