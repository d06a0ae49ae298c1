"""The background sweep of orphaned ledger files: only ledgers allocated
before the start's mark, beside managed ledgers that are open and writing."""
from __future__ import annotations

from magnetar.storage import orphans
from magnetar.storage.file.ledger import Ledger
from magnetar.storage.file.ledger import log_path


async def test_an_orphan_below_the_mark_goes_and_ledgers_made_after_it_stay(factories, store):
    factory = factories()
    ml = await factory.open("t/ns/persistent/a")
    await ml.append(b"kept")
    orphan_id = await factory._new_ledger_id()  # a crash between creating a file and recording it
    Ledger.create(factory.backend.ledger_dir, orphan_id).close()
    factory.abandon()

    restarted = factories()
    mark = await orphans.mark(store)
    # Opened and written before the sweep: its new ledgers are above the mark.
    b = await restarted.open("t/ns/persistent/b")
    await b.append(b"new")
    unrecorded_after_mark = await restarted._new_ledger_id()  # a file being born, not yet recorded
    Ledger.create(restarted.backend.ledger_dir, unrecorded_after_mark).close()

    assert await orphans.sweep(store, restarted.backend, mark) == [orphan_id]
    assert not log_path(restarted.backend.ledger_dir, orphan_id).exists()
    assert log_path(restarted.backend.ledger_dir, unrecorded_after_mark).exists()
    a = await restarted.open("t/ns/persistent/a")
    assert [e.data for e in await a.read_entries(a.first_position(), 10)] == [b"kept"]
    assert [e.data for e in await b.read_entries(b.first_position(), 10)] == [b"new"]


async def test_catalog_lists_a_namespace_without_reading_other_records(factories, store):
    from magnetar.storage import catalog

    factory = factories()
    for name in ("t/ns/persistent/x", "t/ns/persistent/y", "t/ns/persistent/y/__compaction/1", "t/other/persistent/z"):
        await factory.open(name)
    assert await catalog.child_names(store, "t/ns/persistent") == ["x", "y"]
    assert await catalog.names_below(store, "t/ns/persistent/y/__compaction") == ["t/ns/persistent/y/__compaction/1"]
