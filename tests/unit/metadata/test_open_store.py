"""open_store(url): backend choice by URL."""
from __future__ import annotations

import pytest

from magnetar.metadata import EtcdMetadataStore, MemoryMetadataStore, SqliteMetadataStore, open_store


@pytest.mark.parametrize("url", ["memory:", "memory://", "MEMORY:"])
async def test_memory_urls(url):
    store = await open_store(url)
    assert isinstance(store, MemoryMetadataStore)
    await store.close()


async def test_sqlite_absolute_path(tmp_path):
    store = await open_store(f"sqlite://{tmp_path}/meta.db")
    try:
        assert isinstance(store, SqliteMetadataStore)
        assert store.path == tmp_path / "meta.db"
        await store.put("/k", b"v")
    finally:
        await store.close()
    assert (tmp_path / "meta.db").exists()


async def test_sqlite_single_slash_absolute_path(tmp_path):
    store = await open_store(f"sqlite:{tmp_path}/meta.db")  # the broker config's default form
    await store.close()
    assert store.path == tmp_path / "meta.db"


async def test_sqlite_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = await open_store("sqlite:data/meta.db")
    await store.close()
    assert (tmp_path / "data" / "meta.db").exists()


@pytest.mark.parametrize(
    "url",
    [
        "",
        "meta.db",
        "/abs/meta.db",
        "memory:extra",
        "sqlite:",
        "sqlite://",
        "sqlite:///",
        "sqlite://host/meta.db",
        "sqlite:///tmp/meta.db?mode=ro",
        "sqlite:dir/",
        "etcd://",
        "etcd://localhost",
        "etcd://localhost:notaport/p",
        "etcd://:2379/p",
        "etcd://localhost:2379/p?x=1",
        "etcd://localhost:2379/a//b",
        "etcd:localhost:2379",
    ],
)
async def test_bad_urls_raise_value_error(url):
    with pytest.raises(ValueError, match="metadata store URL"):
        await open_store(url)


async def test_etcd_url_with_prefix(etcd_server):
    url = etcd_server.store_url("open-store/one")
    store = await open_store(url)
    other = await open_store(etcd_server.store_url("open-store/two"))
    try:
        assert isinstance(store, EtcdMetadataStore)
        assert store.prefix == "/open-store/one"
        await store.put("/k", b"one")
        assert await other.get("/k") is None  # prefixes keep stores apart
        again = await open_store(url + "/")  # a trailing slash names the same prefix
        assert (await again.get("/k")).value == b"one"
        await again.close()
    finally:
        await store.close()
        await other.close()


async def test_etcd_that_does_not_answer_is_a_clear_error():
    from magnetar.metadata import MetadataError
    from magnetar.metadata.etcd_server import free_port

    with pytest.raises(MetadataError, match="unreachable"):
        await EtcdMetadataStore.open(f"etcd://127.0.0.1:{free_port()}/p", connect_timeout=0.5)
