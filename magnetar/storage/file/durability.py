"""How a group commit's writes become durable: the writer's seam.

The group-commit writer (:mod:`.group_commit`) writes each ledger's batches
of a round to its segment file, then hands them to a :class:`Durability`,
which decides when they are on disk; the round completes after it returns.
Two implementations:

- :class:`SegmentSync` (``journal = false``, and every policy ``never``):
  each segment file is fdatasynced (``always``: every ledger of the round,
  so the cost grows with the ledgers written; ``interval``: a syncer thread
  every ``sync_interval_ms``; ``never``: not at all);
- :class:`~.journal_sync.JournalSync` (the default): one journal append and
  one fdatasync per round, segment files synced by a background checkpoint.
"""
from __future__ import annotations

import logging
import threading
from typing import Protocol

from ..errors import StorageError
from .ledger import Ledger

log = logging.getLogger(__name__)

#: Per ledger of a round: the ledger, its entry count before the round, the bytes written.
Written = tuple[Ledger, int, bytes]


class Durability(Protocol):
    sync_policy: str

    @property
    def fsync_count(self) -> int:
        """fsyncs made so far (all kinds), for stats and tests."""
        ...

    def in_place(self, sizes: list[int]) -> frozenset[int]:
        """Writer thread, before a round's segment writes, given each
        ledger's bytes: the indexes whose segment file :meth:`made_durable`
        will fdatasync (those may be written ``O_DIRECT``, :mod:`.direct_io`)."""
        ...

    def made_durable(self, written: list[Written]) -> dict[Ledger, BaseException]:
        """Writer thread, after a round's segment writes: make them durable
        as the policy says. Returns the ledgers whose batches failed; the
        writer rolls those back to their count before the round and fails
        the batches (none of them may be receipted)."""
        ...

    def close(self) -> bool:
        """After the writer stopped: the last syncs. Whether all is durable."""
        ...

    def abandon(self) -> None:
        """Stop threads without syncing (a simulated crash)."""
        ...


class SegmentSync:
    """Durability by fdatasyncing each segment file (see the module docstring).

    Policy ``interval`` syncs on a second thread (the syncer): an fdatasync
    can take milliseconds, and on the writer thread it would hold up every
    append queued behind it, which is what the policy exists to avoid. The
    syncer pins a ledger's file (the ledger's reader count) while it syncs,
    so a concurrent seal or close never pulls the descriptor from under it.
    A failed periodic fsync fences the ledger (entries already completed
    cannot be retracted: that is the policy's trade-off).
    """

    def __init__(self, sync_policy: str = "always", sync_interval_ms: float = 100, *,
                 name: str = "magnetar-writer") -> None:
        if sync_policy not in ("always", "interval", "never"):
            raise ValueError(f"unknown sync policy {sync_policy!r}")
        self.sync_policy = sync_policy
        self._interval = sync_interval_ms / 1000
        self._unsynced: set[Ledger] = set()  # interval policy: written since the last fsync
        self._unsynced_lock = threading.Lock()
        self._stop = threading.Event()
        self.fsync_count = 0
        self._syncer: threading.Thread | None = None
        if sync_policy == "interval":
            self._syncer = threading.Thread(target=self._sync_periodically, name=f"{name}-syncer", daemon=True)
            self._syncer.start()

    def in_place(self, sizes: list[int]) -> frozenset[int]:
        return frozenset()  # not chosen per write here: no O_DIRECT writes without the journal

    def made_durable(self, written: list[Written]) -> dict[Ledger, BaseException]:
        errors: dict[Ledger, BaseException] = {}
        if self.sync_policy == "always":
            for ledger, _, _ in written:
                try:
                    ledger.sync()
                    self.fsync_count += 1
                except BaseException as exc:
                    errors[ledger] = exc
        elif self.sync_policy == "interval":
            with self._unsynced_lock:
                self._unsynced.update(w[0] for w in written)
        return errors

    def _sync_periodically(self) -> None:
        while not self._stop.wait(self._interval):
            self._sync_unsynced()

    def _sync_unsynced(self) -> None:
        with self._unsynced_lock:
            pending, self._unsynced = self._unsynced, set()
        for ledger in pending:
            try:
                synced = ledger.sync_if_open()
            except StorageError as exc:
                # The disk refused (EIO): expected of a failing disk, so one
                # line, not a traceback per ledger per period.
                log.error("periodic fsync of ledger %d failed; fencing it: %s", ledger.ledger_id, exc)
                ledger.fence()
                continue
            except BaseException:
                log.exception("periodic fsync of ledger %d failed; fencing it", ledger.ledger_id)
                ledger.fence()
                continue
            if synced:
                self.fsync_count += 1

    def close(self) -> bool:
        self.abandon()
        self._sync_unsynced()  # the last writes, now that both threads are gone
        return True

    def abandon(self) -> None:
        self._stop.set()
        if self._syncer is not None:
            self._syncer.join()
