"""The checkpoint: segment files synced in the background, the journal trimmed behind them.

The writer tells :meth:`Checkpointer.written` which ledgers a round wrote and
the journal position past the round's records, in that order under one lock
(the segment writes happened before the journal's). A checkpoint takes the
position and the set of ledgers written since the last one together, so every
record before that position has its ledger in the set; it fdatasyncs each of
them, records the position durably in the journal's ``checkpoint`` file, and
deletes the journal files wholly before it. Replay starts there.

Every ``interval_s`` on a thread of its own, off the append path; also once
more at a clean stop (:meth:`Checkpointer.close`), after the writer finished,
which then lets the journal be deleted.

Failures: a segment file whose fsync fails (EIO) may have lost what the
journal still holds, so the checkpoint does not advance past it, ever: the
ledger is fenced (its managed ledger rolls to a new one) and the journal
keeps every record from there until the broker restarts, whose replay checks
the segment files against it. One error line per failed checkpoint.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from ..errors import StorageError
from .journal import Journal, JournalPosition
from .ledger import Ledger

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 2.0


class Checkpointer:
    """See the module docstring. Counters are for stats and /metrics."""

    def __init__(self, journal: Journal, interval_s: float = DEFAULT_INTERVAL_S, *,
                 name: str = "magnetar-checkpoint") -> None:
        self.journal = journal
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
        failed = []
        for ledger in dirty:
            try:
                if ledger.sync_if_open():
                    self.segment_fsyncs += 1
            except StorageError as exc:
                failed.append(ledger)
                ledger.fence()
                log.error("journal checkpoint: %s; the journal is kept from here until a restart replays it", exc)
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

    def close(self) -> bool:
        """Stop the thread, then a last checkpoint (call after the writer
        stopped); whether it covered everything."""
        self._stop.set()
        self._thread.join()
        return self.checkpoint()

    def abandon(self) -> None:
        """Stop the thread without a checkpoint (a simulated crash)."""
        self._stop.set()
        self._thread.join()
