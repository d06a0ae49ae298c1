"""Fixtures: one real SeaweedFS S3 endpoint and one real etcd per session;
each test gets its own object prefix and its own etcd key prefix."""
from __future__ import annotations

import itertools
import os

import pytest

from magnetar.metadata import EtcdMetadataStore
from magnetar.metadata.etcd_server import EtcdServer
from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.seaweed import SeaweedServer

_prefixes = itertools.count()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory):
    server = SeaweedServer(tmp_path_factory.mktemp("objectstore"), bucket="magnetar-ledgers").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory):
    server = EtcdServer(tmp_path_factory.mktemp("etcd")).start()
    try:
        yield server
    finally:
        server.stop()


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
