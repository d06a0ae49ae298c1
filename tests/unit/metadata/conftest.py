"""Fixtures for the metadata contract tests: one ``store`` per backend.

A new backend joins every contract test by being added to BACKENDS. The etcd
backend runs against the session's real etcd server (``etcd_server``:
tests/conftest.py), each test under a prefix of its own.
"""
from __future__ import annotations

import asyncio
import itertools
import os
from typing import Callable

import pytest

from magnetar.metadata import EtcdMetadataStore, MemoryMetadataStore, Notification, SqliteMetadataStore
from magnetar.metadata.routed import RoutedStore

BACKENDS = ["memory", "sqlite", "etcd", "routed"]

#: The routed backend sends these keys to its "configuration store" and the
#: rest to its local one; "/a/b" makes "/a" a key whose children come from both.
ROUTED_PREFIXES = ("/k", "/w", "/a/b")

_prefixes = itertools.count()


@pytest.fixture
def etcd_url(etcd_server) -> str:
    """A store URL on the shared server with a prefix no other test uses."""
    return etcd_server.store_url(f"test-{os.getpid()}-{next(_prefixes)}")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
async def store(backend, tmp_path, request):
    if backend == "memory":
        s = await MemoryMetadataStore.open()
    elif backend == "sqlite":
        s = await SqliteMetadataStore.open(tmp_path / "meta.db")
    elif backend == "routed":
        s = RoutedStore(await MemoryMetadataStore.open(), await SqliteMetadataStore.open(tmp_path / "conf.db"),
                        ROUTED_PREFIXES)
    else:
        s = await EtcdMetadataStore.open(request.getfixturevalue("etcd_url"))
    try:
        yield s
    finally:
        await s.close()


class Recorder:
    """A watch callback that queues notifications for the test to await."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Notification] = asyncio.Queue()

    def __call__(self, note: Notification) -> None:
        self.queue.put_nowait(note)

    async def next(self, timeout: float = 5.0) -> Notification:
        return await asyncio.wait_for(self.queue.get(), timeout)

    def pending(self) -> list[Notification]:
        notes = []
        while not self.queue.empty():
            notes.append(self.queue.get_nowait())
        return notes


@pytest.fixture
def recorder() -> Callable[[], Recorder]:
    return Recorder
