"""Data written before the storage seam reads back after it: every entry,
every cursor, the properties, and the crashed ledger's recovery.

The fixture (``fixtures/data_v1``: sqlite metadata + segment files) was
written by the code of 775dff1 with ``fixtures/make_data_v1.py``; it is
copied before opening, since opening recovers and writes.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig

from .fixtures.make_data_v1 import payload

FIXTURE = Path(__file__).parent / "fixtures" / "data_v1"


async def read_all(ml) -> list[bytes]:
    first = ml.first_position()
    return [e.data for e in await ml.read_entries(first, 1000)] if first else []


async def test_a_data_directory_of_the_previous_code_reads_back(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    store = await SqliteMetadataStore.open(data / "metadata.db")
    factory = ManagedLedgerFactory(data / "storage", store, StorageConfig(max_entries_per_ledger=7))
    try:
        assert await factory.list_names() == ["v1/a", "v1/b", "v1/c"]
        assert await factory.remove_orphaned_ledgers() == []

        a = await factory.open("v1/a")
        entries = await a.read_entries(a.first_position(), 1000)
        # its first ledger (entries 0..6) was consumed and trimmed before the fixture was saved
        assert [e.data for e in entries] == [payload("v1/a", i) for i in range(7, 30)]
        positions = [None] * 7 + [e.position for e in entries]
        sub = a.cursors["sub"]
        assert sub.mark_delete_position == positions[9]
        assert [p for p in positions[7:] if sub.is_deleted(p)] == positions[7:10] + [positions[i] for i in (12, 13, 20)]
        assert [e.data for e in await sub.read_entries(100)] == [
            payload("v1/a", i) for i in range(10, 30) if i not in (12, 13, 20)]
        assert sub.backlog() == 30 - 13
        assert a.properties == {"k": "v"}

        b = await factory.open("v1/b")
        tail = b.cursors["tail"]
        kept = await read_all(b)
        assert kept == [payload("v1/b", i) for i in range(20 - len(kept), 20)] and len(kept) >= 5
        assert [e.data for e in await tail.read_entries(10)] == [payload("v1/b", i) for i in range(16, 20)]

        c = await factory.open("v1/c")  # its open ledger was never sealed: recovered here
        assert await read_all(c) == [payload("v1/c", i) for i in range(5)]
        assert c.cursors["from-start"].backlog() == 5

        # and the old data takes new appends after it
        pos = await a.append(b"after")
        assert pos > positions[-1]
        assert (await a.read_entries(pos, 1))[0].data == b"after"
    finally:
        await factory.close()
        await store.close()
