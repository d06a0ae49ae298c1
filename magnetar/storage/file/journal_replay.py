"""Replaying the journals of broker processes that are gone, before any ledger is opened.

A journal record's entries were in the segment file's page cache before the
record was written (the writer writes segments first), so a process killed
with ``kill -9`` loses nothing there; after a power loss or kernel crash the
segment files may lack what only the journal holds. Replay puts it back:
every journal of the data directory whose lock is free (its process is gone:
this broker's previous run, or a cluster peer's that shared the directory)
is read from its checkpoint on, and each record's entries that its segment
file lacks are appended there; then the segment files are fsynced and the
journal deleted.

Per record, against the segment file as :meth:`Ledger.recover` finds it
(torn tail cut):

- no segment file: the ledger was deleted (trimmed, or dropped empty after
  a fence): skipped, never recreated;
- a valid index (sealed, by its writer or by a new owner that recovered
  it): skipped. A seal fsyncs the segment first, and a new owner's recovery
  read every entry the old owner receipted (the old owner wrote it to the
  segment before it fsynced the journal and checked for the fence marker);
  entries a fenced (zombie) owner wrote after the fence are not receipted,
  and stay out;
- entries the segment already holds: skipped; the rest appended in order.
  A record that starts past the segment's end (a gap: never written so) is
  logged and skipped.

One replayer at a time: :func:`open_journal` holds ``journal/lock`` while it
replays and while it creates the new journal, so two brokers starting
together never replay the same journal, and neither serves (and recovers a
ledger) before the journals it found dead are replayed. A replay that fails
(the disk refuses) raises ``StorageError`` and keeps the journal: the broker
does not start on segment files that may lack receipted entries.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import StorageError
from .handles import FileHandles
from .journal import (JOURNALS, LOCK, Journal, JournalRecord, file_path, fsync_dir, lock_directory, read_checkpoint,
                      records_from, zeros_after)
from ..framing import parse_frames
from .ledger import Ledger, LedgerState

log = logging.getLogger(__name__)


@dataclass
class ReplayReport:
    journals: int = 0
    records: int = 0
    #: Entries appended to segment files (0 after a clean stop or a kill -9).
    entries_restored: int = 0
    torn_tails: int = 0


def journal_root(data_dir: Path) -> Path:
    return Path(data_dir) / JOURNALS


def open_journal(data_dir: Path, ledger_dir: Path, handles: FileHandles, file_bytes: int) -> tuple[Journal, ReplayReport]:
    """Replay every dead journal under ``data_dir``, then start this
    process's own. Raises ``StorageError`` if a replay fails, ``OSError``
    if the journal cannot be created."""
    root = journal_root(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    guard = lock_directory(root, blocking=True)
    try:
        report = ReplayReport()
        for name in sorted(os.listdir(root)):
            directory = root / name
            if name == LOCK or not directory.is_dir():
                continue
            fd = lock_directory(directory)
            if fd is None:
                continue  # its process is alive
            try:
                replay(directory, ledger_dir, handles, report)
                _remove(directory)
            finally:
                os.close(fd)
        if report.journals:
            log.info("replayed %d journal(s): %d records, %d entries restored to segment files, %d torn tail(s) cut",
                     report.journals, report.records, report.entries_restored, report.torn_tails)
        return Journal(root, file_bytes), report
    finally:
        os.close(guard)


def replay(directory: Path, ledger_dir: Path, handles: FileHandles, report: ReplayReport) -> None:
    """Apply one journal's records from its checkpoint (see the module docstring)."""
    report.journals += 1
    ledgers: dict[int, Ledger | None] = {}
    try:
        for seq, records, end in records_from(directory, read_checkpoint(directory)):
            if not zeros_after(file_path(directory, seq), end):
                report.torn_tails += 1
            for record in records:
                report.records += 1
                if record.ledger_id not in ledgers:
                    ledgers[record.ledger_id] = _open(ledger_dir, record.ledger_id, handles)
                ledger = ledgers[record.ledger_id]
                if ledger is not None:
                    report.entries_restored += _apply(ledger, record)
        for ledger in ledgers.values():
            if ledger is not None:
                ledger.sync()
    except (OSError, StorageError) as exc:
        raise StorageError(f"cannot replay the journal {directory}: {exc}") from exc
    finally:
        for ledger in ledgers.values():
            if ledger is not None:
                ledger.close()


def _open(ledger_dir: Path, ledger_id: int, handles: FileHandles) -> Ledger | None:
    try:
        ledger = Ledger.recover(ledger_dir, ledger_id, handles)
    except FileNotFoundError:
        return None
    if ledger.state is LedgerState.CLOSED:
        ledger.close()
        return None
    return ledger


def _apply(ledger: Ledger, record: JournalRecord) -> int:
    have = ledger.entry_count
    if record.first_entry_id + record.count <= have:
        return 0
    if record.first_entry_id > have:
        log.error("journal: ledger %d holds %d entries, a record starts at %d: skipped",
                  ledger.ledger_id, have, record.first_entry_id)
        return 0
    datas = parse_frames(record.payload, record.count)  # ValueError: a bug (the record's CRC held)
    missing = datas[have - record.first_entry_id:]
    ledger.write_entries(missing)
    return len(missing)


def _remove(directory: Path) -> None:
    for name in os.listdir(directory):
        if name != LOCK:
            os.unlink(directory / name)
    os.unlink(directory / LOCK)
    os.rmdir(directory)
    fsync_dir(directory.parent)
