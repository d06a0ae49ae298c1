"""Fixtures: each test gets its own object prefix and its own etcd key prefix
on the session's SeaweedFS and etcd (``seaweed``, ``etcd_server``:
tests/conftest.py)."""
from __future__ import annotations

import itertools
import os

import pytest

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store

_prefixes = itertools.count()


@pytest.fixture
def prefix() -> str:
    return f"t{os.getpid()}-{next(_prefixes)}"


@pytest.fixture
def objects_url(seaweed, prefix, monkeypatch) -> str:
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    return seaweed.store_url(prefix)


@pytest.fixture
async def objects(objects_url):
    store = open_object_store(objects_url)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def etcd_store(etcd_server, prefix):
    store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(autouse=True)
def compaction_rounds_at_once(monkeypatch):
    """A sealed ledger's compaction from the store waits for the next round
    (30 s after the round's first seal, in a broker); these tests wait for
    compactions: a round 50 ms after its first seal (a test of the rounds sets its own)."""
    from magnetar.storage.object import compaction_rounds
    monkeypatch.setattr(compaction_rounds, "COMPACT_ROUND_S", 0.05)
