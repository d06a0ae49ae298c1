"""Large writes synced in their segment file instead of the journal
(storage/file/direct_sync.py), on real files.

A power loss is modelled at the one call the ledgers sync through
(``ledger._datasync``): each segment file is cut back to the size it had
at its last fdatasync (nothing if it was never synced), so an entry that
was receipted without being synced, in its segment or in the journal,
would be missing after the restart."""
from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

from magnetar.storage import StorageError
from magnetar.storage.file import ledger as ledger_module
from magnetar.storage.file.direct_sync import choose_direct

NEVER_S = 3600 * 1000  # a checkpoint interval (ms) no test reaches
BIG = 300_000  # one entry past the default journal_direct_bytes (256 KiB)


class SyncedSizes:
    """Records each segment file's size at its fdatasyncs; ``power_loss``
    cuts every segment file back to it. ``failing``: syncs raise EIO."""

    def __init__(self, monkeypatch) -> None:
        self.synced: dict[str, int] = {}
        self.failing = False
        real = ledger_module._datasync

        def datasync(fd: int) -> None:
            if self.failing:
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real(fd)
            path = os.readlink(f"/proc/self/fd/{fd}")
            self.synced[path] = os.fstat(fd).st_size

        monkeypatch.setattr(ledger_module, "_datasync", datasync)

    def power_loss(self, data_dir: Path) -> int:
        """Cut each unsealed segment file to its synced size; how many lost bytes."""
        cut = 0
        for log in (Path(data_dir) / "ledgers").glob("*.log"):
            if log.with_suffix(".idx").exists():
                continue
            keep = self.synced.get(str(log.resolve()), 0)
            size = log.stat().st_size
            if size > keep:
                os.truncate(log, keep)
                cut += size - keep
        return cut


async def _read_all(ml) -> list[bytes]:
    first = ml.first_position()
    return [e.data for e in await ml.read_entries(first, 100_000)] if first is not None else []


def test_choose_direct_takes_the_largest_writes_past_the_threshold_at_most_most():
    written = [("a", 0, b"x" * 10), ("b", 0, b"x" * 500), ("c", 0, b"x" * 300), ("d", 0, b"x" * 900),
               ("e", 0, b"x" * 100)]
    direct, journaled = choose_direct(written, min_bytes=300, most=2)
    assert [w[0] for w in direct] == ["b", "d"]  # the two largest of three, in the round's order
    assert [w[0] for w in journaled] == ["a", "c", "e"]
    assert choose_direct(written, min_bytes=1000, most=4) == ([], written)
    assert choose_direct(written, min_bytes=0, most=4) == ([], written)


async def test_a_large_write_is_synced_in_its_segment_not_copied_into_the_journal(factories, data_dir, monkeypatch):
    disk = SyncedSizes(monkeypatch)
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    journal, durability = factory.backend.journal, factory.backend.writer.durability
    acked = [b"small-0"]
    await ml.append(acked[0])
    journal_bytes = journal.bytes_written
    big = [bytes([i]) * BIG for i in range(3)]
    for data in big:
        await ml.append(data)
    acked += big
    assert journal.bytes_written == journal_bytes  # written once: the segment file only
    assert durability.direct_syncs == 3
    acked.append(b"small-1")
    await ml.append(acked[-1])  # journaled again
    assert journal.bytes_written > journal_bytes
    assert factory.backend.stats().counters["direct_fsyncs"] == 3

    factory.abandon()  # kill -9, then the power loss
    assert disk.power_loss(data_dir) > 0  # the last small entry was only in the journal
    again = factories()
    assert await _read_all(await again.open("t")) == acked


async def test_below_the_threshold_or_with_it_off_every_write_goes_through_the_journal(factories):
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S, journal_direct_bytes=0)
    ml = await factory.open("t")
    before = factory.backend.journal.bytes_written
    await ml.append(b"x" * BIG)
    assert factory.backend.journal.bytes_written - before > BIG
    assert factory.backend.writer.durability.direct_syncs == 0


async def test_many_large_writes_in_one_round_sync_at_most_four_segments_besides_the_journal(factories):
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    mls = [await factory.open(f"t{i}") for i in range(10)]
    writer = factory.backend.writer
    rounds, fsyncs = writer.round_count, writer.fsync_count
    await asyncio.gather(*(ml.append(b"y" * BIG) for ml in mls))
    rounds = writer.round_count - rounds
    assert writer.fsync_count - fsyncs <= 5 * rounds
    assert writer.durability.direct_syncs >= 4
    for ml in mls:
        assert await _read_all(ml) == [b"y" * BIG]


async def test_a_failed_segment_sync_fails_that_write_only_and_nothing_of_it_comes_back(factories, data_dir,
                                                                                        monkeypatch):
    disk = SyncedSizes(monkeypatch)
    factory = factories(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    await ml.append(b"ok")
    broken = ml.ledgers[-1].ledger_id
    disk.failing = True
    try:
        await ml.append(b"z" * BIG)
    except StorageError:
        pass
    else:
        raise AssertionError("a write whose fdatasync failed was receipted")
    finally:
        disk.failing = False
    later = await ml.append(b"later")
    assert later.ledger_id > broken  # the failed ledger was fenced; the managed ledger rolled over
    assert await _read_all(ml) == [b"ok", b"later"]
    factory.abandon()
    disk.power_loss(data_dir)
    assert await _read_all(await factories().open("t")) == [b"ok", b"later"]
