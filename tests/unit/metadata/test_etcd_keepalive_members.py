"""A session's keep-alive stream on a store of several etcd members moves to
the next member each time its stream goes unanswered, on a connection to that
member alone (magnetar/metadata/etcd.py: ``keepalive_stub``).

Three proxies in front of one real etcd stand for three members. A frozen
proxy keeps its connections open and forwards nothing, as a member out of
reach whose connection still looks ready: the store's round robin would go
on picking it."""
from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time

import pytest

from magnetar.metadata import EtcdMetadataStore
from magnetar_chaos.proxy import CutProxy

pytestmark = pytest.mark.timeout(90)

TTL_S = 4
_prefixes = itertools.count()


class FreezingProxy(CutProxy):
    """Forwards bytes until frozen; then drops them both ways, connections left open."""

    def __init__(self, target_port: int) -> None:
        self.frozen = threading.Event()
        self.connections = 0
        super().__init__(target_port)

    def relay(self, from_broker: bool = False):
        if not from_broker:
            with self._lock:
                self.connections += 1

        def forward(data: bytes, dst) -> None:
            if not self.frozen.is_set():
                dst.sendall(data)
        return forward


@pytest.fixture
def proxies(etcd_server):
    made = [FreezingProxy(etcd_server.client_port) for _ in range(3)]
    try:
        yield made
    finally:
        for proxy in made:
            proxy.close()


async def test_an_unanswered_keepalive_tries_each_member_in_turn_and_the_session_lives(proxies, wait_until):
    url = "etcd://" + ",".join(f"127.0.0.1:{p.port}" for p in proxies) + f"/keepalive-{os.getpid()}-{next(_prefixes)}"
    store = await EtcdMetadataStore.open(url)
    try:
        # The store's own channel reaches every member (round robin connects to all).
        await wait_until(lambda: all(p.connections >= 1 for p in proxies), 10, "the store's connections")
        before = [p.connections for p in proxies]
        session = await store.create_session(TTL_S)
        # Its keep-alive stream has a connection of its own, to one member.
        await wait_until(lambda: sum(p.connections for p in proxies) == sum(before) + 1, 10,
                         "the keep-alive stream's own connection")
        first = next(i for i, p in enumerate(proxies) if p.connections > before[i])
        second, third = (first + 1) % 3, (first + 2) % 3
        # The member it is on and the next one go out of reach: the stream
        # must try the next (frozen too, and never connected) and then the third.
        proxies[first].frozen.set()
        proxies[second].frozen.set()
        frozen_at = time.monotonic()
        await wait_until(lambda: proxies[third].connections > before[third], TTL_S,
                         "a keep-alive stream on the third member")
        while time.monotonic() - frozen_at < 2 * TTL_S:
            assert session.alive, "the session was lost with one member of three still answering"
            await asyncio.sleep(0.1)
        assert session.alive
    finally:
        for proxy in proxies:
            proxy.frozen.clear()
        await store.close()
