"""Durability by the journal: one fdatasync per group commit, whatever the number of ledgers.

A :class:`~.durability.Durability` for the group-commit writer. After a
round's segment writes (not synced), :meth:`JournalSync.made_durable`
appends one journal record per ledger written (the very bytes that went to
its segment file, with the ledger id and first entry id), then:

- policy ``"always"``: fdatasyncs the journal once; the round completes
  after it. If that fsync fails (EIO), every batch of the round fails (none
  is receipted) and the journal goes on in a new file;
- policy ``"interval"``: the round completes after the write; a syncer
  thread fdatasyncs the journal every ``sync_interval_ms``. A failed
  periodic fsync fences every ledger written since the last good one
  (entries already completed cannot be retracted: the policy's trade-off,
  as without a journal).

Under ``"always"``, a ledger that got at least ``direct_min_bytes`` in the
round (the broker passes ``[storage] journal_direct_bytes``, 256 KiB by
default; at most ``direct_most`` such per round) is fdatasynced in its
segment file instead and gets no record (:mod:`.direct_sync`): its bytes
are written once, not twice.

The checkpoint (:mod:`.journal_checkpoint`) syncs the segment files later
and trims the journal; replay (:mod:`.journal_replay`) restores what a crash
kept from the segment files.
"""
from __future__ import annotations

import logging
import threading

from ..errors import StorageError
from . import direct_sync
from .journal import Journal, record_head
from .journal_checkpoint import Checkpointer
from .ledger import Ledger

log = logging.getLogger(__name__)


class JournalSync:
    """See the module docstring. ``fsync_count`` counts the journal's
    fdatasyncs and the checkpoint's segment fsyncs."""

    def __init__(self, journal: Journal, checkpointer: Checkpointer, sync_policy: str = "always",
                 sync_interval_ms: float = 100, *, direct_min_bytes: int = direct_sync.DEFAULT_MIN_BYTES,
                 direct_most: int = direct_sync.DEFAULT_MOST) -> None:
        if sync_policy not in ("always", "interval"):
            raise ValueError(f"the journal serves sync policies always and interval, not {sync_policy!r}")
        self.journal = journal
        self.checkpointer = checkpointer
        self.sync_policy = sync_policy
        self._interval = sync_interval_ms / 1000
        #: Policy always: a ledger's round of at least this many bytes is
        #: synced in its segment file, not journaled (:mod:`.direct_sync`).
        self.direct_min_bytes = direct_min_bytes if sync_policy == "always" else 0
        self.direct_most = direct_most
        #: Segment fdatasyncs made instead of journal records.
        self.direct_syncs = 0
        self._direct = direct_sync.DirectSyncs(direct_most) if self.direct_min_bytes else None
        self._unsynced: set[Ledger] = set()
        self._unsynced_lock = threading.Lock()
        self._stop = threading.Event()
        self._syncer: threading.Thread | None = None
        if sync_policy == "interval":
            self._syncer = threading.Thread(target=self._sync_periodically, name="magnetar-journal-syncer",
                                            daemon=True)
            self._syncer.start()

    @property
    def fsync_count(self) -> int:
        return self.journal.fsync_count + self.checkpointer.segment_fsyncs + self.direct_syncs

    def in_place(self, sizes: list[int]) -> frozenset[int]:
        """Before a round's writes, given each ledger's bytes: the indexes
        :meth:`made_durable` will fdatasync in their segment file (the
        writer may write those ``O_DIRECT``)."""
        if not self.direct_min_bytes:
            return frozenset()
        return frozenset(direct_sync.choose_direct_indexes(sizes, self.direct_min_bytes, self.direct_most))

    def made_durable(self, written: list[tuple[Ledger, int, bytes]]) -> dict[Ledger, BaseException]:
        """Writer thread: ``written`` holds ``(ledger, entries before the
        round, bytes written)`` per ledger. Returns the ledgers whose
        batches failed: every journaled one or none, and each synced in
        place whose fdatasync failed."""
        if not written:
            return {}
        started: list = []
        if self._direct is not None:
            direct, written = direct_sync.choose_direct(written, self.direct_min_bytes, self.direct_most)
            if direct:
                started = self._direct.start(direct)
        failed = self._journaled(written) if written else {}
        if started:
            direct_failed = self._direct.wait(started)
            self.direct_syncs += len(started) - len(direct_failed)
            failed.update(direct_failed)
        return failed

    def _journaled(self, written: list[tuple[Ledger, int, bytes]]) -> dict[Ledger, BaseException]:
        """One record per ledger of ``written``, then (policy always) the
        journal's fdatasync; the ledgers that failed (all or none)."""
        parts = []
        for ledger, before, data in written:
            parts.append(record_head(ledger.ledger_id, before, ledger.entry_count - before, data))
            parts.append(data)
        try:
            position = self.journal.append(parts)
        except StorageError as exc:
            return {w[0]: exc for w in written}
        ledgers = [w[0] for w in written]
        self.checkpointer.written(ledgers, position)
        if self.sync_policy == "always":
            try:
                self.journal.sync()
            except StorageError as exc:
                self.journal.after_failed_sync()
                # Per ledger, naming it: the managed ledger logs and reports this.
                return {ledger: StorageError(f"fsync of ledger {ledger.ledger_id} failed (in the journal): "
                                             f"{exc.__cause__ or exc}") for ledger in ledgers}
        else:
            with self._unsynced_lock:
                self._unsynced.update(ledgers)
        return {}

    def _sync_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            self._sync_unsynced()

    def _sync_unsynced(self) -> None:
        with self._unsynced_lock:
            pending, self._unsynced = self._unsynced, set()
        if not pending:
            return
        try:
            self.journal.sync()
        except StorageError as exc:
            self.journal.after_failed_sync()
            for ledger in sorted(pending, key=lambda ledger: ledger.ledger_id):
                # One line per ledger it fences, no traceback: expected of a failing disk.
                log.error("periodic fsync of ledger %d failed; fencing it (its writes were in the journal's "
                          "fsync): %s", ledger.ledger_id, exc)
                ledger.fence()

    def close(self) -> bool:
        """After the writer stopped: the last journal sync, then the last
        checkpoint; whether it covered everything (the journal may go)."""
        self._stop.set()
        if self._direct is not None:
            self._direct.close()
        if self._syncer is not None:
            self._syncer.join()
            self._sync_unsynced()
        return self.checkpointer.close()

    def abandon(self) -> None:
        self._stop.set()
        if self._direct is not None:
            self._direct.close()
        if self._syncer is not None:
            self._syncer.join()
        self.checkpointer.abandon()
