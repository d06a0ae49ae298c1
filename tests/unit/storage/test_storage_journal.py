"""The journal (storage/file/journal*.py) on real files: one fdatasync per
group commit whatever the number of ledgers, segment files synced later by
the checkpoint, replayed from the journal after a crash.

A power loss is modelled by cutting every unsealed segment file to what was
fsynced: nothing, as the checkpoint never ran (a long interval). A ``kill
-9`` alone keeps the page cache, so it would hide a missing replay."""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from magnetar.metadata import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.errors import ManagedLedgerFencedError, StorageError
from magnetar.formats import NewerFormatError
from magnetar.storage.file.journal import FORMAT, Journal, JournalPosition, file_path, journal_files, read_records, record_head, records_from
from magnetar.storage.file import syncfs
from magnetar.storage.file.journal_checkpoint import SYNCFS_FROM
from magnetar.storage.file.journal_replay import journal_root
from magnetar.storage.framing import frames

NEVER_S = 3600 * 1000  # a checkpoint interval (ms) no test reaches


def lose_unsynced_segment_data(data_dir: Path) -> int:
    """What a power loss does to segment files the checkpoint never synced:
    cut every unsealed one to empty. Returns how many were cut."""
    cut = 0
    ledgers = Path(data_dir) / "ledgers"
    for log in ledgers.glob("*.log"):
        if not log.with_suffix(".idx").exists() and log.stat().st_size:
            os.truncate(log, 0)
            cut += 1
    return cut


async def _read_all(ml) -> list[bytes]:
    first = ml.first_position()
    return [e.data for e in await ml.read_entries(first, 100_000)] if first is not None else []


async def test_one_fsync_per_group_commit_whatever_the_number_of_ledgers(factories):
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    mls = [await factory.open(f"t{i}") for i in range(200)]
    writer = factory.backend.writer
    before_rounds, before_fsyncs = writer.round_count, writer.fsync_count
    await asyncio.gather(*(ml.append(b"x%d" % i) for i, ml in enumerate(mls)))
    rounds = writer.round_count - before_rounds
    # Without the journal each round syncs each ledger it wrote: 200 fsyncs.
    assert writer.fsync_count - before_fsyncs == rounds < 20


async def test_receipted_entries_survive_a_crash_that_lost_unsynced_segment_data(factories, data_dir):
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    names = [f"t{i}" for i in range(20)]
    mls = [await factory.open(n) for n in names]
    acked = {n: [] for n in names}
    for round_ in range(5):
        datas = [b"%s-%d" % (n.encode(), round_) for n in names]
        await asyncio.gather(*(ml.append(d) for ml, d in zip(mls, datas)))
        for n, d in zip(names, datas):
            acked[n].append(d)
    factory.abandon()  # kill -9
    assert lose_unsynced_segment_data(data_dir) == 20

    again = factories()
    report = again.backend.replay_report
    assert report.journals == 1 and report.entries_restored == 100
    for n in names:
        assert await _read_all(await again.open(n)) == acked[n]
    assert not [p for p in journal_root(data_dir).iterdir() if p.is_dir() and p != again.backend.journal.directory]


async def test_a_torn_journal_tail_is_cut(tmp_path):
    journal = Journal(tmp_path / "journal")
    payloads = [frames([b"e%d" % i]) for i in range(3)]
    for i, payload in enumerate(payloads):
        journal.append([record_head(7, i, 1, payload), payload])
    journal.sync()
    journal.close(remove=False)
    path = file_path(journal.directory, journal_files(journal.directory)[0])
    whole = path.read_bytes()[:journal.position.offset]  # the records, without the zeros made ahead of them
    for torn in (whole[:-3], whole + b"\0" * 64, whole[:-len(payloads[-1]) - 5] + b"\xff" * 9):
        path.write_bytes(torn)
        (seq, records, end), = records_from(journal.directory, JournalPosition(0, 0))
        assert [r.first_entry_id for r in records] == list(range(len(records)))
        assert len(records) == (3 if torn.startswith(whole) else 2)
        assert end == (len(whole) if torn.startswith(whole) else len(whole) - len(payloads[-1]) - 28)
    assert read_records(b"\0" * 100) == ([], 0)


async def test_a_torn_tail_is_cut_on_replay_and_the_records_before_it_restored(factories, data_dir):
    factory = factories(journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    for i in range(4):
        await ml.append(b"e%d" % i)
    journal_dir = factory.backend.journal.directory
    seq, end = factory.backend.journal.position
    factory.abandon()
    with open(file_path(journal_dir, seq), "r+b") as f:  # the last record half written, as a crash mid-journal leaves it
        f.seek(end - 2)
        f.write(b"\0\0")
    lose_unsynced_segment_data(data_dir)

    again = factories()
    assert again.backend.replay_report.torn_tails == 1
    assert await _read_all(await again.open("t")) == [b"e0", b"e1", b"e2"]


async def test_the_journal_is_trimmed_after_a_checkpoint(factories, data_dir, wait_until):
    factory = factories(journal_checkpoint_interval_ms=20, journal_file_bytes=4096)
    mls = [await factory.open(f"t{i}") for i in range(10)]
    for round_ in range(60):
        await asyncio.gather(*(ml.append(b"%d" % round_ * 50) for ml in mls))
    journal = factory.backend.journal
    checkpointer = factory.backend.checkpointer
    assert journal.bytes_written > 10 * 4096
    await wait_until(lambda: checkpointer._checkpointed == journal.position and journal.file_count() == 1,
                     what="a checkpoint of everything, the journal trimmed")
    assert checkpointer.segment_fsyncs >= 10
    assert (journal.directory / "checkpoint").exists()
    factory.abandon()
    again = factories()
    assert again.backend.replay_report.journals == 1
    assert again.backend.replay_report.records == 0  # replay starts at the checkpoint
    for i in range(10):
        assert len(await _read_all(await again.open(f"t{i}"))) == 60


async def test_a_clean_stop_leaves_no_journal(factories, data_dir):
    factory = factories(journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    await ml.append(b"a")
    await factory.close()
    assert [p for p in journal_root(data_dir).iterdir() if p.is_dir()] == []


async def test_a_live_brokers_journal_is_left_alone(tmp_path):
    """Brokers of a cluster may share a data directory: each keeps its own
    journal, and one starting never replays or deletes a live one's."""
    store = await MemoryMetadataStore.open()
    first = ManagedLedgerFactory(tmp_path, store, StorageConfig())
    ml = await first.open("t/ns/persistent/x")
    await ml.append(b"a")
    second = ManagedLedgerFactory(tmp_path, store, StorageConfig())
    assert second.backend.replay_report.journals == 0
    assert first.backend.journal.directory.exists()
    await ml.append(b"b")
    await second.close()
    await first.close()
    await store.close()


async def test_a_zombie_gets_no_receipt_and_its_journal_replayed_adds_nothing(tmp_path):
    """The old owner, paused past the takeover, writes into its journal and
    fsyncs it, then finds the fence marker: no receipt. When it dies and a
    broker replays its journal, the ledger the new owner sealed gets nothing
    of what the zombie wrote after the fence."""
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(journal_checkpoint_interval_ms=NEVER_S))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig())
    zombie = await old.open("t/ns/persistent/x")
    acked = [b"a%d" % i for i in range(3)]
    for data in acked:
        await zombie.append(data)
    zombie._record.stop_watching()
    owner = await new.open("t/ns/persistent/x")
    with pytest.raises(ManagedLedgerFencedError):
        await zombie.append(b"late")  # in the zombie's journal, fsynced, never receipted
    await owner.append(b"new owner")
    await new.close()
    old.abandon()  # the zombie dies; its journal holds a0..a2 and "late"

    third = ManagedLedgerFactory(tmp_path, store, StorageConfig())
    report = third.backend.replay_report
    assert report.journals == 1 and report.records >= 4 and report.entries_restored == 0
    ml = await third.open("t/ns/persistent/x")
    assert await _read_all(ml) == acked + [b"new owner"]
    await third.close()
    await store.close()


async def test_without_the_journal_each_ledger_is_synced(factories):
    factory = factories(journal=False)
    mls = [await factory.open(f"t{i}") for i in range(30)]
    before = factory.backend.writer.fsync_count
    await asyncio.gather(*(ml.append(b"x") for ml in mls))
    assert factory.backend.writer.fsync_count - before >= 30
    assert factory.backend.journal is None


@pytest.mark.skipif(not syncfs.available(), reason="syncfs reports writeback errors from Linux 5.8 on")
async def test_a_checkpoint_of_many_ledgers_is_one_syncfs(factories, wait_until):
    factory = factories(journal_checkpoint_interval_ms=NEVER_S)
    mls = [await factory.open(f"t{i}") for i in range(SYNCFS_FROM + 8)]
    await asyncio.gather(*(ml.append(b"x") for ml in mls))
    checkpointer = factory.backend.checkpointer
    before = checkpointer.segment_fsyncs
    assert await asyncio.to_thread(checkpointer.checkpoint)
    assert checkpointer.segment_fsyncs - before == 1  # not one per ledger
    assert factory.backend.journal.file_count() == 1


async def test_a_journal_in_a_newer_format_stops_the_start_and_is_left_alone(factories, data_dir):
    factory = factories(journal_checkpoint_interval_ms=NEVER_S)
    await (await factory.open("t")).append(b"a")
    journal_dir = factory.backend.journal.directory
    factory.abandon()
    path = file_path(journal_dir, journal_files(journal_dir)[0])
    data = bytearray(path.read_bytes())
    data[4:8] = (FORMAT + 1).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(NewerFormatError, match="newer than this Magnetar reads"):
        factories()
    assert path.read_bytes() == bytes(data)


def test_a_failed_directory_fsync_while_starting_a_journal_file_fails_that_round_only(tmp_path, monkeypatch):
    """EIO from the fsync of the journal's directory as a new file starts (a
    disk error, or make chaos's fsync-error): that append fails, the next
    one starts the file again and goes on."""
    import magnetar.storage.file.journal as journal_module

    journal = Journal(tmp_path / "journal")
    real = journal_module.fsync_dir
    failures = iter([OSError(5, "Input/output error")])

    def failing_once(directory):
        error = next(failures, None)
        if error is not None:
            raise error
        real(directory)

    monkeypatch.setattr(journal_module, "fsync_dir", failing_once)
    journal.after_failed_sync()  # the next append starts a new file
    with pytest.raises(StorageError, match="cannot start a new journal file"):
        journal.append([b"lost"])
    position = journal.append([b"kept"])
    assert position.seq == 2 and journal.sync() == position


async def test_records_overwrite_zeros_made_ahead_so_their_syncs_change_no_file_size(tmp_path, wait_until):
    """The journal's file is zero-filled and synced ahead of its records
    (journal_room.py): a record written there changes neither the file's
    size nor its blocks, so its fdatasync waits for no filesystem
    transaction. Without the room every append grows the file."""
    journal = Journal(tmp_path / "journal", preallocate_bytes=1 << 20)
    room = journal._room
    await wait_until(lambda: room.fills >= 1, what="the first chunk of zeros")
    path = file_path(journal.directory, journal.position.seq)
    size = path.stat().st_size
    assert size >= 1 << 20
    for i in range(50):
        payload = frames([b"e%d" % i])
        journal.append([record_head(7, i, 1, payload), payload])
        journal.sync()
        assert path.stat().st_size == size
    journal.close(remove=False)
    (_, records, end), = records_from(journal.directory, JournalPosition(0, 0))
    assert [r.first_entry_id for r in records] == list(range(50)) and end == journal.position.offset


async def test_zeros_made_ahead_never_cover_a_record_and_the_next_file_is_made_ready(tmp_path):
    """A small room and small files, many records: the fills run beside the
    appends and files roll over often. Every record reads back intact, in
    order, from files made ready ahead; the zeros after the last record are
    not a torn tail."""
    from magnetar.storage.file.journal import zeros_after

    journal = Journal(tmp_path / "journal", file_bytes=64 * 1024, preallocate_bytes=8 * 1024)
    payloads = [frames([b"%06d" % i * 20]) for i in range(2000)]
    for i, payload in enumerate(payloads):
        journal.append([record_head(1, i, 1, payload), payload])
        if i % 7 == 0:
            journal.sync()
    journal.sync()
    room = journal._room
    journal.close(remove=False)
    assert room.fills > 0 and room.spares > 0
    seen = []
    for seq, records, end in records_from(journal.directory, JournalPosition(0, 0)):
        seen += [r.payload for r in records]
        assert zeros_after(file_path(journal.directory, seq), end)
    assert seen == payloads
