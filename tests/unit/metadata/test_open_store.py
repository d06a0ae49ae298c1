"""open_store(url): backend choice by URL."""
from __future__ import annotations

import pytest

from magnetar.metadata import MemoryMetadataStore, SqliteMetadataStore, open_store


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
        "etcd://localhost:2379",
        "memory:extra",
        "sqlite:",
        "sqlite://",
        "sqlite:///",
        "sqlite://host/meta.db",
        "sqlite:///tmp/meta.db?mode=ro",
        "sqlite:dir/",
    ],
)
async def test_bad_urls_raise_value_error(url):
    with pytest.raises(ValueError, match="metadata store URL"):
        await open_store(url)
