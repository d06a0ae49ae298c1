"""A previous owner that missed the takeover (paused, a zombie) acknowledges nothing more.

Two managed ledger factories share one directory and one metadata store, as
two brokers of a cluster do. The old owner's metadata watch is cancelled, as
if it were paused when the new owner took the managed ledger over, so only
the data path can stop it: the fence marker the new owner writes before it
recovers the old owner's open ledger.
"""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.errors import CursorFencedError, ManagedLedgerFencedError, StorageError


async def test_a_zombie_owner_gets_no_receipt_after_the_new_owner_fenced_its_ledger(tmp_path):
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    zombie = await old.open("t/ns/persistent/x")
    acked = [await zombie.append(b"a%d" % i) for i in range(3)]
    zombie._record.stop_watching()  # paused: it will not hear of the takeover through metadata

    owner = await new.open("t/ns/persistent/x")
    with pytest.raises(ManagedLedgerFencedError):
        await zombie.append(b"late")  # written and synced, but never acknowledged
    with pytest.raises(ManagedLedgerFencedError):
        await zombie.append(b"later")  # refused from then on

    stored = await owner.read_entries(owner.first_position(), 100)
    assert [e.data for e in stored][:3] == [b"a0", b"a1", b"a2"]
    assert [e.position for e in stored][:3] == acked  # everything acknowledged is there
    pos = await owner.append(b"new owner")
    assert (await owner.read_entries(pos, 1))[0].data == b"new owner"
    await new.close()
    old.abandon()
    await store.close()


async def test_the_fence_is_checked_off_the_event_loop_once_per_ledger_a_round_wrote(tmp_path, monkeypatch):
    """The marker check (a stat) runs on the group-commit writer after the
    round's fsync, once per ledger written, not per batch on the event
    loop; a zombie still gets no receipt for a round that found it."""
    import threading

    from magnetar.storage.file import file_backend

    checks: list[tuple[str, int]] = []
    real = file_backend.fenced_among

    def recording(directory, ledger_ids):
        checks.extend((threading.current_thread().name, ledger_id) for ledger_id in ledger_ids)
        return real(directory, ledger_ids)

    monkeypatch.setattr(file_backend, "fenced_among", recording)
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    zombie = await old.open("t/ns/persistent/x")
    await asyncio.gather(*(zombie.append(b"a%d" % i) for i in range(50)))  # one or a few rounds, 50 batches at most
    assert checks and {name for name, _ in checks} == {"magnetar-writer"}
    assert len(checks) <= old.backend.writer.round_count
    zombie._record.stop_watching()
    await new.open("t/ns/persistent/x")
    with pytest.raises(ManagedLedgerFencedError):
        await zombie.append(b"late")
    await new.close()
    old.abandon()
    await store.close()


async def test_a_zombie_owner_cannot_overwrite_a_cursor_the_new_owner_loaded(tmp_path):
    """The zombie's consumers acked before it froze; when it wakes it persists
    those acks. Had that write landed after the new owner loaded the cursor,
    the new owner's next write would conflict and its subscription would
    stall for good. The zombie's write is refused instead (its record moved
    on), the zombie counts itself fenced and says so, and the new owner's
    cursor goes on."""
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    zombie = await old.open("t/ns/persistent/x")
    positions = [await zombie.append(b"a%d" % i) for i in range(4)]
    cursor = await zombie.open_cursor("sub", "earliest")
    await cursor.mark_delete(positions[0])
    zombie._record.stop_watching()  # paused: it will not hear of the takeover through metadata
    fenced = []
    zombie.add_fence_listener(lambda: fenced.append(zombie.state))

    owner = await new.open("t/ns/persistent/x")
    assert owner.cursors["sub"].mark_delete_position == positions[0]
    with pytest.raises(CursorFencedError):
        await cursor.mark_delete(positions[2])  # the zombie wakes and persists its acks
    assert zombie.state == "fenced"
    await asyncio.sleep(0)  # listeners run on the loop's next turn
    assert fenced == ["fenced"]

    await owner.cursors["sub"].mark_delete(positions[1])  # the new owner's cursor is not stuck
    reopened = await ManagedLedgerFactory(tmp_path, store, StorageConfig()).open("t/ns/persistent/x")
    assert reopened.cursors["sub"].mark_delete_position == positions[1]
    old.abandon()
    await store.close()


async def test_a_zombie_gets_no_receipt_for_its_empty_ledger_the_new_owner_dropped(tmp_path):
    """The zombie's current ledger was empty when the new owner recovered it,
    so the new owner dropped it. Its fence marker must outlive its data: the
    zombie still holds the file open, and a write there that found no marker
    would be acknowledged, on a file no managed ledger names (lost)."""
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    zombie = await old.open("t/ns/persistent/x")
    zombie._record.stop_watching()
    owner = await new.open("t/ns/persistent/x")  # the zombie's empty ledger: fenced, then dropped
    with pytest.raises(ManagedLedgerFencedError):
        await zombie.append(b"late")
    assert owner.first_position() is None
    await new.close()
    old.abandon()
    await store.close()


async def test_opening_again_after_being_fenced_recovers_what_the_other_owner_stored(tmp_path):
    """A broker fenced out of a managed ledger (its record moved on) that
    later owns the topic again must not reload it on the fenced instance:
    that instance's view ends where the other owner took over, and a topic
    built on it answered a next offset below receipts already given (the
    object-storage soak's one stale read)."""
    store = await MemoryMetadataStore.open()
    a = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    b = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    first = await a.open("t/ns/persistent/x")
    await first.append(b"a0")
    other = await b.open("t/ns/persistent/x")  # the other broker takes it over
    stored = await other.append(b"b0")
    with pytest.raises(ManagedLedgerFencedError):
        await first.append(b"late")  # a finds out
    assert first.state == "fenced"
    await b.close()  # and hands it back
    again = await a.open("t/ns/persistent/x")
    assert again is not first and again.last_confirmed == stored
    await a.close()
    await store.close()


async def test_opening_again_after_a_failure_or_during_a_close_gives_an_open_instance(tmp_path):
    """Only an open instance is handed out again: a failed one (its view
    may end before entries it could not confirm) is replaced, and a close
    under way is waited for."""
    store = await MemoryMetadataStore.open()
    factory = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    first = await factory.open("t/ns/persistent/x")
    stored = await first.append(b"a0")
    first._appends.fail(StorageError("the disk went away"))
    assert first.state == "failed"
    second = await factory.open("t/ns/persistent/x")
    assert second is not first and second.state == "open" and second.last_confirmed == stored
    closing = asyncio.get_running_loop().create_task(second.close())
    await asyncio.sleep(0)
    assert second.state == "closing"
    third = await factory.open("t/ns/persistent/x")
    assert closing.done() and third is not second and third.state == "open" and third.last_confirmed == stored
    await factory.close()
    await store.close()
