"""Segment files: the first :class:`~..backend.LedgerBackend` (``--storage file``).

Each ledger is ``<data dir>/ledgers/<id:020d>.log`` (+ ``.idx`` once
sealed, ``.fenced`` once a new owner took it; formats in :mod:`.ledger`).
Writes go through one :class:`~.group_commit.GroupCommitWriter` thread;
with ``journal`` (the default) each round is also appended to this
process's journal, which is fdatasync'ed once per group commit under sync
policy ``always`` (:mod:`.journal_sync`), the segment files synced by the
checkpoint (:mod:`.journal_checkpoint`); the journals of processes that
are gone are replayed before the first ledger is opened
(:mod:`.journal_replay`). The fence is a marker file: a previous owner
still running checks for it after every group commit's sync and before it
acknowledges anything (``ManagedLedgerFencedError``), on the writer
thread, once per ledger the round wrote.
"""
from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from ..backend import READ_CHUNK_BYTES, BackendStats, WriteCallback
from ..config import StorageConfig
from ..errors import ManagedLedgerFencedError, StorageError
from . import direct_io
from .group_commit import GroupCommitWriter
from .journal import Journal
from .journal_checkpoint import Checkpointer
from .journal_replay import ReplayReport, open_journal
from .journal_sync import JournalSync
from .handles import FileHandles, capacity_within_limit
from ..framing import HEADER_SIZE
from .ledger import Ledger, delete_ledger_files, fenced_among, is_fenced, ledger_dir, write_fence

log = logging.getLogger(__name__)

#: Reads of more bytes than this go to a thread; smaller ones are a page-cache pread on the loop.
SYNC_READ_BYTES = 256 * 1024


class FileBackend:
    """Ledgers as segment files under ``data_dir/ledgers``. Two backends
    (two brokers' factories) may share a directory: ids never repeat."""

    def __init__(self, data_dir: Path, config: StorageConfig) -> None:
        self.ledger_dir = ledger_dir(Path(data_dir))
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        self._dir = str(self.ledger_dir)  # is_fenced runs once per group commit: no Path there
        capacity, warning = capacity_within_limit(config.max_open_ledger_files)
        if warning:
            log.warning("%s", warning)
        else:
            log.info("keeping at most %d segment files open%s", capacity,
                     "" if config.max_open_ledger_files else " (half the open-file limit)")
        #: Open segment files, bounded: idle ones close and reopen on use.
        #: With the journal a dirty one may close unsynced: the checkpoint
        #: opens it again to sync it, and the journal holds its entries.
        self.handles = FileHandles(capacity, close_dirty=config.sync_policy == "never" or config.journaled)
        #: This process's journal and its checkpoint (None without one).
        self.journal: Journal | None = None
        self.checkpointer: Checkpointer | None = None
        #: What replaying the journals of processes that were gone did.
        self.replay_report = ReplayReport()
        durability = None
        if config.journaled:
            # Before any ledger is opened: replays dead journals into the segment files.
            self.journal, self.replay_report = open_journal(Path(data_dir), self.ledger_dir, self.handles,
                                                            config.journal_file_bytes)
            self.checkpointer = Checkpointer(self.journal, config.journal_checkpoint_interval_ms / 1000,
                                             segments=self.ledger_dir)
            durability = JournalSync(self.journal, self.checkpointer, config.sync_policy, config.sync_interval_ms,
                                     direct_min_bytes=config.journal_direct_bytes)
        direct_writer = None
        if durability is not None and durability.direct_min_bytes and config.segment_direct_io:
            why_not = direct_io.refusal(self._dir)
            if why_not is None:
                direct_writer = direct_io.DirectWriter()
            else:
                log.warning("large segment writes go through the page cache, not O_DIRECT: %s (%s)",
                            why_not, self._dir)
        self.writer = GroupCommitWriter(config.sync_policy, config.sync_interval_ms, durability=durability,
                                        taken_over=self._taken_over, direct_writer=direct_writer)

    async def create_beside(self, ledger_id: int) -> None:
        return None  # a ledger is a file: nothing to write beside the record

    async def create(self, ledger_id: int) -> Ledger:
        return await self.writer.call(Ledger.create, self.ledger_dir, ledger_id, self.handles)

    def submit(self, ledger: Ledger, datas: list[bytes], callback: WriteCallback, loop) -> None:
        self.writer.submit_write(ledger, datas, callback, loop)

    def submit_many(self, writes: list[tuple], loop) -> None:
        self.writer.submit_writes(writes, loop)

    def _taken_over(self, ledgers: list[Ledger]) -> dict[Ledger, BaseException]:
        # The writer thread, after the round's fsync, before any receipt: a
        # new owner's marker means this round's batches of the ledger may not
        # be acknowledged (its recovery may have cut them). One call for the
        # round's ledgers (round_io.exist: one release of the GIL).
        fenced = fenced_among(self._dir, [ledger.ledger_id for ledger in ledgers])
        return {ledger: ManagedLedgerFencedError(f"ledger {ledger.ledger_id} was fenced by a new owner")
                for ledger, yes in zip(ledgers, fenced) if yes}

    async def seal(self, ledger: Ledger) -> tuple[int, int]:
        return await self.writer.call(ledger.seal)

    async def fence(self, ledger_id: int) -> None:
        try:
            await asyncio.to_thread(write_fence, self.ledger_dir, ledger_id)
        except FileNotFoundError:
            pass  # the ledger directory itself is gone: recover finds nothing either

    async def recover(self, ledger_id: int) -> Ledger | None:
        try:
            ledger = await asyncio.to_thread(Ledger.recover, self.ledger_dir, ledger_id, self.handles)
        except FileNotFoundError:
            return None
        if ledger.entry_count:
            await asyncio.to_thread(ledger.seal)
        # else: nothing to seal, and the caller drops an empty ledger (an
        # idle topic's, after a stop: two fsyncs fewer on its first use).
        return ledger

    async def open_sealed(self, ledger_id: int, entries: int) -> Ledger:
        try:
            return await asyncio.to_thread(Ledger.open_sealed, self.ledger_dir, ledger_id, entries, self.handles)
        except OSError as exc:
            raise StorageError(f"cannot open ledger {ledger_id}: {exc}") from exc

    async def read(self, ledger: Ledger, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        limit = READ_CHUNK_BYTES if max_bytes is None else min(READ_CHUNK_BYTES, max_bytes + HEADER_SIZE)
        if ledger.range_bytes(first, last) > limit:
            last = ledger.last_within(first, last, limit)
        if ledger.range_bytes(first, last) > SYNC_READ_BYTES:
            return await asyncio.to_thread(ledger.read_range, first, last)
        return ledger.read_range(first, last)  # a page-cache pread: cheaper than a thread hop

    async def taken_over(self, ledger_id: int) -> bool:
        return await asyncio.to_thread(is_fenced, self._dir, ledger_id)

    async def delete(self, ledger_id: int, ledger: Ledger | None = None, *, fenced: bool = False) -> None:
        # With ``fenced`` the marker file stays: a zombie's fd still reaches the
        # unlinked segment, and only the marker stops its receipt. In a
        # cluster nothing removes it (a zero-byte file per dropped ledger); a
        # standalone broker's orphan sweep does, as no zombie shares its files.
        if ledger is not None:
            await asyncio.to_thread(ledger.delete_files, keep_fence=fenced)
        else:
            await asyncio.to_thread(delete_ledger_files, self.ledger_dir, ledger_id, keep_fence=fenced)

    async def stored_ledger_ids(self) -> set[int]:
        return await asyncio.to_thread(self._ids_on_disk)

    def _ids_on_disk(self) -> set[int]:
        ids = set()
        for name in os.listdir(self.ledger_dir):
            stem, dot, suffix = name.partition(".")
            if dot and suffix in ("log", "idx", "fenced") and len(stem) == 20 and stem.isdigit():
                ids.add(int(stem))
        return ids

    def set_profile(self, ledger: Ledger, profile: str | None) -> None:
        pass  # every batch goes to the next group commit: nothing to choose

    def stats(self) -> BackendStats:
        """``fsyncs``: fsyncs of the write path (the journal's and the
        checkpoint's, or each segment file's); ``journal_fsyncs``,
        ``segment_fsyncs``: the two apart (the checkpoint's), ``direct_fsyncs``:
        segment files of large writes synced instead of journaled; ``group_commits``: the writer's
        rounds; ``journal_bytes``, ``checkpoints``; ``open_files``: segment
        files open now, ``open_files_capacity`` at most, ``reopens``: opened
        again after the pool closed them."""
        counters = {"fsyncs": self.writer.fsync_count, "group_commits": self.writer.round_count,
                    "open_files": self.handles.open_count, "open_files_capacity": self.handles.capacity,
                    "reopens": self.handles.reopens}
        if self.journal is not None:
            counters.update(journal_fsyncs=self.journal.fsync_count, segment_fsyncs=self.checkpointer.segment_fsyncs,
                            journal_bytes=self.journal.bytes_written, checkpoints=self.checkpointer.checkpoints,
                            direct_fsyncs=self.writer.durability.direct_syncs)
        else:
            counters.update(journal_fsyncs=0, segment_fsyncs=self.writer.fsync_count)
        return BackendStats("file", counters)

    async def close(self) -> None:
        """Finish the queued writes; with the journal, a last checkpoint,
        and the journal deleted if it covered everything."""
        await self.writer.close()  # the last checkpoint is the durability's close
        if self.journal is not None:
            clean = await asyncio.to_thread(self.checkpointer.checkpoint)  # True if nothing is left to sync
            await asyncio.to_thread(self.journal.close, remove=clean)

    def abandon(self) -> None:
        self.writer.abandon()
        if self.journal is not None:
            self.journal.close(remove=False)
