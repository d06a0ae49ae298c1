"""The checkpoint: segment files synced in the background, the journal trimmed behind them.

The writer tells :meth:`Checkpointer.written` which ledgers a round wrote and
the journal position past the round's records, in that order under one lock
(the segment writes happened before the journal's). A checkpoint takes the
position and the set of ledgers written since the last one together, so every
record before that position has its ledger in the set; it fdatasyncs each of
them, records the position durably in the journal's ``checkpoint`` file, and
deletes the journal files wholly before it. Replay starts there.

With at least ``syncfs_from`` ledgers to sync, one ``syncfs(2)`` on the
segment files' filesystem replaces their fdatasyncs (:mod:`.syncfs`: one
writeback pass and one filesystem commit instead of one per file, which
the journal's own fdatasync would queue behind); fewer, or without syncfs,
one fdatasync each.

Every ``interval_s`` on a thread of its own, off the append path; also once
more at a clean stop (:meth:`Checkpointer.close`), after the writer finished,
which then lets the journal be deleted.

Failures: a segment file whose fsync fails (EIO; with syncfs every
ledger of that checkpoint, as the error names no file) may have lost what
the journal still holds, so the checkpoint does not advance past it, ever:
the ledger is fenced (its managed ledger rolls to a new one) and the journal
keeps every record from there until the broker restarts, whose replay checks
the segment files against it. One error line per failed checkpoint.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Iterable

from ..errors import StorageError
from .journal import Journal, JournalPosition
from . import syncfs
from .ledger import Ledger

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
#: From this many dirty ledgers on, one syncfs instead of an fdatasync each.
SYNCFS_FROM = 32


class Checkpointer:
    """See the module docstring. Counters are for stats and /metrics."""

    def __init__(self, journal: Journal, interval_s: float = DEFAULT_INTERVAL_S, *,
                 segments: Path | None = None, syncfs_from: int = SYNCFS_FROM,
                 name: str = "magnetar-checkpoint") -> None:
        self.journal = journal
        #: A descriptor on the segment files' filesystem for syncfs (None: file by file).
        self._fs_fd = os.open(segments, os.O_RDONLY) if segments is not None and syncfs.available() else None
        self._syncfs_from = syncfs_from
        self._interval = interval_s
        self._lock = threading.Lock()
        self._dirty: set[Ledger] = set()
        self._position = journal.position
        self._checkpointed = JournalPosition(0, 0)
        #: Once a segment fsync failed: the journal is kept from there on.
        self._stuck = False
        self.checkpoints = 0
        self.segment_fsyncs = 0
        self.last_checkpoint_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def written(self, ledgers: Iterable[Ledger], position: JournalPosition) -> None:
        """Writer side: ``ledgers`` got segment writes for records before ``position``."""
        with self._lock:
            self._dirty.update(ledgers)
            self._position = position

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.checkpoint()
            except BaseException:  # never let the thread die silently
                log.exception("journal checkpoint failed")

    def checkpoint(self) -> bool:
        """One checkpoint; whether everything written before it is now in
        synced segment files (and the journal trimmed up to it)."""
        with self._lock:
            position, dirty, self._dirty = self._position, self._dirty, set()
        if self._stuck:
            return False
        if position == self._checkpointed:
            return True
        started = time.monotonic()
        failed = self._sync(dirty)
        if failed:
            self._stuck = True
            return False
        try:
            self.journal.write_checkpoint(position)
        except OSError as exc:
            log.error("journal checkpoint could not be recorded: %s", exc)
            with self._lock:
                self._dirty.update(dirty)  # try again next time (already synced: cheap)
            return False
        self.journal.trim(position)
        self._checkpointed = position
        self.checkpoints += 1
        self.last_checkpoint_s = time.monotonic() - started
        return True

    def _sync(self, dirty: set[Ledger]) -> list[Ledger]:
        """Sync the segment files of ``dirty``; the ledgers that failed (fenced)."""
        if self._fs_fd is not None and len(dirty) >= self._syncfs_from:
            try:
                syncfs.syncfs(self._fs_fd)
                self.segment_fsyncs += 1
                return []
            except OSError as exc:
                log.error("journal checkpoint: syncfs of the segment files failed (%s); fencing the %d ledgers "
                          "written since the last checkpoint; the journal is kept from here until a restart "
                          "replays it", exc, len(dirty))
                for ledger in dirty:
                    ledger.fence()
                return list(dirty)
        failed = []
        for ledger in dirty:
            try:
                if ledger.sync_if_open():
                    self.segment_fsyncs += 1
            except StorageError as exc:
                failed.append(ledger)
                ledger.fence()
                log.error("journal checkpoint: %s; the journal is kept from here until a restart replays it", exc)
        return failed

    def close(self) -> bool:
        """Stop the thread, then a last checkpoint (call after the writer
        stopped); whether it covered everything."""
        self._stop.set()
        self._thread.join()
        try:
            return self.checkpoint()
        finally:
            self._close_fs_fd()

    def abandon(self) -> None:
        """Stop the thread without a checkpoint (a simulated crash)."""
        self._stop.set()
        self._thread.join()
        self._close_fs_fd()

    def _close_fs_fd(self) -> None:
        fd, self._fs_fd = self._fs_fd, None
        if fd is not None:
            os.close(fd)
