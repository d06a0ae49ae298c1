"""Closing a managed ledger nothing was written to since it opened writes
nothing (a clean stop of many idle topics costs no I/O per topic); its empty
ledger is dropped by the next open, as after a crash."""
from __future__ import annotations


async def test_closing_an_idle_managed_ledger_writes_no_metadata_and_reopens_cleanly(factories, store):
    factory = factories()
    ml = await factory.open("t/ns/persistent/idle")
    await ml.append(b"before")
    await ml.close()
    ml = await factory.open("t/ns/persistent/idle")
    empty_id = ml.ledgers[-1].ledger_id
    changes = []
    watch = store.watch("/managed-ledgers/t/ns/persistent/idle", changes.append)
    await ml.close()
    watch.cancel()
    assert changes == []
    assert not (factory.ledger_dir / f"{empty_id:020d}.idx").exists()  # not sealed

    again = await factories().open("t/ns/persistent/idle")
    assert empty_id not in [m.ledger_id for m in again.ledgers]
    assert len(again.ledgers) == 2  # the first, sealed one and a new one: no pile-up
    assert [e.data for e in await again.read_entries(again.first_position(), 10)] == [b"before"]
