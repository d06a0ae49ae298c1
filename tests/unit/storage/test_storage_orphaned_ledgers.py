"""Ledger files no managed ledger names (left by a crash) are removed at start-up."""
from __future__ import annotations

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageError
from magnetar.storage.file.ledger import Ledger
from magnetar.storage.file.ledger import log_path


async def test_a_ledger_created_but_never_recorded_is_removed(factories):
    factory = factories()
    ml = await factory.open("t")
    for i in range(5):
        await ml.append(b"m%d" % i)
    # What a crash between creating a rollover's file and recording it leaves.
    orphan_id = await factory._new_ledger_id()
    Ledger.create(factory.backend.ledger_dir, orphan_id).close()
    factory.abandon()

    restarted = factories()
    assert await restarted.remove_orphaned_ledgers() == [orphan_id]
    assert not log_path(restarted.backend.ledger_dir, orphan_id).exists()
    ml = await restarted.open("t")
    entries = await ml.read_entries(ml.first_position(), 10)
    assert [e.data for e in entries] == [b"m%d" % i for i in range(5)]


async def test_nothing_is_removed_when_every_ledger_is_named(factories):
    factory = factories()
    for name in ("a", "b/c"):
        ml = await factory.open(name)
        await ml.append(b"x")
    await factory.close()
    restarted = factories()
    assert await restarted.remove_orphaned_ledgers() == []
    for name in ("a", "b/c"):
        ml = await restarted.open(name)
        assert [e.data for e in await ml.read_entries(ml.first_position(), 10)] == [b"x"]


async def test_files_without_any_managed_ledger_in_the_store_are_left_alone(factories, data_dir):
    factory = factories()
    ml = await factory.open("t")
    await ml.append(b"x")
    await factory.close()
    files = sorted(p.name for p in (data_dir / "ledgers").iterdir())

    stranger = ManagedLedgerFactory(data_dir, MemoryMetadataStore())  # the wrong (or a lost) metadata store
    try:
        assert await stranger.remove_orphaned_ledgers() == []
    finally:
        await stranger.close()
    assert sorted(p.name for p in (data_dir / "ledgers").iterdir()) == files


async def test_refused_once_a_managed_ledger_is_open(factories):
    factory = factories()
    await factory.open("t")
    with pytest.raises(StorageError):
        await factory.remove_orphaned_ledgers()
