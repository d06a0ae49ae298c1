"""The journal: one append-only log per broker for the entries of all its ledgers.

With a journal, a group commit costs one fdatasync whatever the number of
ledgers it wrote (BookKeeper's design): the writer appends each ledger's
batch to its segment file *without* syncing it, then appends the same bytes,
tagged with the ledger id and first entry id, to the journal, fdatasyncs the
journal once, and only then completes the round. Segment files are synced
later by the checkpoint (:mod:`.journal_checkpoint`); after a crash the
journal is replayed into them (:mod:`.journal_replay`).

Layout: ``<data dir>/journal/<incarnation>/`` per broker process (brokers of
a cluster may share a data directory: each has its own), holding

- ``lock``: an exclusive ``flock`` held for the process's lifetime; a
  journal whose lock can be taken belongs to a process that is gone;
- ``<seq:016d>.jnl``: journal files, numbered from 1; a new one starts
  when the current one passes ``file_bytes``, and after a failed write or
  fsync (what follows a failure never shares a file with it);
- ``checkpoint``: the journal position ``(seq, offset)`` below which every
  record's segment writes are synced (absent: replay from the start).

A journal file starts with ``b"MGJL" u32 format`` (:data:`FORMAT`; a file
in a newer format stops replay with ``NewerFormatError``: nothing of it is
applied). A record is ``[u32 payload length][u32 crc32c][u64 ledger id][u64 first
entry id][u32 entry count]`` then the payload: the batch's entries framed
exactly as in the segment file (:mod:`.ledger`). The CRC covers the three
id fields and the payload, so a torn or zero-filled tail never reads as a
record; replay stops a file at its first bad record.

Room (:mod:`.journal_room`): a file is zero-filled and synced ahead of its
records, which overwrite the zeros (``pwrite`` at the journal's own offset,
no ``O_APPEND``), so the journal's fdatasync waits for no filesystem
transaction; the next file is made ready before it is needed. Zeros after
the last record read as the end, so the format is unchanged.

Threading: :meth:`Journal.append` and :meth:`Journal.rotate` run on one
thread (the writer); :meth:`Journal.sync` may run on another (the interval
syncer) and syncs a duplicate of the descriptor, so an append never waits
for an fsync; :meth:`Journal.trim` and the checkpoint run on a third.
"""
from __future__ import annotations

import fcntl
import functools
import os
import secrets
import struct
import threading
from pathlib import Path
from typing import Iterator, NamedTuple

from magnetar.formats import KINDS, check_format

from ..errors import StorageError
from ..framing import crc as _crc
from . import ledger as _ledger
from .journal_room import Preallocator

#: Folder under the data directory holding one journal per broker process.
JOURNALS = "journal"
LOCK = "lock"
CHECKPOINT = "checkpoint"
SUFFIX = ".jnl"
#: A new journal file past this size (the checkpoint trims whole files).
DEFAULT_FILE_BYTES = 64 * 1024 * 1024
#: Zeros written ahead of the records at a time (:mod:`.journal_room`).
PREALLOCATE_BYTES = 4 * 1024 * 1024

_LEN_CRC = struct.Struct(">II")
_FIELDS = struct.Struct(">QQI")
RECORD_HEAD_SIZE = _LEN_CRC.size + _FIELDS.size
#: The journal files' format (``magnetar.formats.KINDS["journal"]``).
FORMAT = KINDS["journal"]
_FILE_HEAD = struct.Struct(">4sI")
_FILE_MAGIC = b"MGJL"
FILE_HEAD_SIZE = _FILE_HEAD.size
_CHECKPOINT = struct.Struct(">4sQQ")
_CHECKPOINT_MAGIC = b"MGJC"



class JournalPosition(NamedTuple):
    """A place in a journal: file number, byte offset in it."""

    seq: int
    offset: int


class JournalRecord(NamedTuple):
    ledger_id: int
    first_entry_id: int
    count: int
    payload: bytes


def record_head(ledger_id: int, first_entry_id: int, count: int, payload: bytes) -> bytes:
    """The header that goes before ``payload`` (a batch as framed in its segment file)."""
    fields = _FIELDS.pack(ledger_id, first_entry_id, count)
    return _LEN_CRC.pack(len(payload), _crc(payload, _crc(fields))) + fields


def read_records(data: bytes, start: int = 0) -> tuple[list[JournalRecord], int]:
    """The intact records of a journal file's bytes from ``start``, and the
    offset where they stop (the first short, empty or CRC-bad record)."""
    records = []
    pos = start
    end = len(data)
    while pos + RECORD_HEAD_SIZE <= end:
        n, checksum = _LEN_CRC.unpack_from(data, pos)
        body = pos + RECORD_HEAD_SIZE
        if n == 0 or body + n > end:
            break
        fields = data[pos + _LEN_CRC.size:body]
        payload = data[body:body + n]
        if _crc(payload, _crc(fields)) != checksum:
            break
        ledger_id, first, count = _FIELDS.unpack(fields)
        records.append(JournalRecord(ledger_id, first, count, payload))
        pos = body + n
    return records, pos


def file_path(directory: Path, seq: int) -> Path:
    return Path(directory) / f"{seq:016d}{SUFFIX}"


def journal_files(directory: Path) -> list[int]:
    """Sequence numbers of the journal files in ``directory``, ascending."""
    seqs = []
    for name in os.listdir(directory):
        stem, suffix = name[:-len(SUFFIX)], name[-len(SUFFIX):]
        if suffix == SUFFIX and stem.isdigit():
            seqs.append(int(stem))
    return sorted(seqs)


def read_checkpoint(directory: Path) -> JournalPosition:
    """The checkpoint recorded in ``directory``; ``(0, 0)`` (replay all) if none is valid."""
    try:
        data = (Path(directory) / CHECKPOINT).read_bytes()
    except FileNotFoundError:
        return JournalPosition(0, 0)
    if len(data) != _CHECKPOINT.size + 4 or struct.unpack_from(">I", data, _CHECKPOINT.size)[0] != _crc(data[:-4]):
        return JournalPosition(0, 0)
    magic, seq, offset = _CHECKPOINT.unpack_from(data)
    return JournalPosition(seq, offset) if magic == _CHECKPOINT_MAGIC else JournalPosition(0, 0)


def records_from(directory: Path, start: JournalPosition) -> Iterator[tuple[int, list[JournalRecord], int]]:
    """``(seq, records, valid_end)`` of each journal file at or after
    ``start``, in order. A file's records stop at its first bad one (a torn
    tail); the next file is still read (a file is abandoned after a failed
    write or fsync, and writing goes on in the next)."""
    for seq in journal_files(directory):
        if seq < start.seq:
            continue
        path = file_path(directory, seq)
        data = path.read_bytes()
        if len(data) < FILE_HEAD_SIZE or data[:4] != _FILE_MAGIC:
            yield seq, [], 0  # created, its head never written whole: nothing in it
            continue
        check_format("the journal file", str(path), _FILE_HEAD.unpack_from(data)[1], FORMAT)
        records, end = read_records(data, max(FILE_HEAD_SIZE, start.offset if seq == start.seq else 0))
        yield seq, records, end


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_file(directory: Path, seq: int) -> int:
    """Create journal file ``seq`` with its head (synced with the first
    records) and sync the directory; its descriptor. On failure nothing is
    left (left there, O_EXCL refused every later try: EEXIST for good after
    one failed directory fsync, found by make chaos's fsync-error)."""
    path = file_path(directory, seq)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.pwrite(fd, _FILE_HEAD.pack(_FILE_MAGIC, FORMAT), 0)
        fsync_dir(directory)
    except BaseException:
        os.close(fd)
        discard_file(directory, seq)
        raise
    return fd


def discard_file(directory: Path, seq: int) -> None:
    """Remove journal file ``seq`` if it is there (one that holds no record)."""
    try:
        os.unlink(file_path(directory, seq))
    except OSError:
        pass


def zeros_after(path: Path, end: int) -> bool:
    """Whether a journal file's bytes from ``end`` (past its last intact
    record) are zeros only (room made ahead, :mod:`.journal_room`), not part
    of a record (a torn tail). Reads them."""
    with open(path, "rb") as f:
        f.seek(end)
        while chunk := f.read(1 << 20):
            if chunk.count(0) != len(chunk):
                return False
    return True


def lock_directory(directory: Path, *, blocking: bool = False) -> int | None:
    """An exclusive flock on ``directory/lock`` (the descriptor; closing it
    releases the lock), or None if another process holds it."""
    fd = os.open(Path(directory) / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


class Journal:
    """This process's journal (see the module docstring). Raises ``OSError``
    from the constructor if the directory cannot be made.

    ``preallocate_bytes`` (0: none) is how far ahead of the records a file
    is zero-filled, capped by ``file_bytes``."""

    def __init__(self, root: Path, file_bytes: int = DEFAULT_FILE_BYTES,
                 preallocate_bytes: int = PREALLOCATE_BYTES) -> None:
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        self.directory = root / f"{os.getpid()}-{secrets.token_hex(6)}"
        self.directory.mkdir()
        self._lock_fd = lock_directory(self.directory)
        self.file_bytes = file_bytes
        self._lock = threading.Lock()
        self._seq = 0
        self._fd = -1
        self._offset = 0
        self._rotate_pending = False
        #: fdatasyncs of journal files (stats, /metrics).
        self.fsync_count = 0
        self.bytes_written = 0
        self._room: Preallocator | None = None
        if preallocate_bytes > 0:
            self._room = Preallocator(functools.partial(create_file, self.directory),
                                      functools.partial(discard_file, self.directory), FILE_HEAD_SIZE,
                                      min(preallocate_bytes, file_bytes), file_bytes)
        self._open_next()
        fsync_dir(root)

    @property
    def position(self) -> JournalPosition:
        """Where the next record goes (just past every record appended)."""
        return JournalPosition(self._seq, self._offset)

    def _open_next(self) -> None:
        seq = self._seq + 1
        spare = self._room.take_spare(seq) if self._room is not None else None
        fd, zeroed = spare if spare is not None else (create_file(self.directory, seq), 0)
        with self._lock:
            old, self._fd, self._seq, self._offset = self._fd, fd, seq, FILE_HEAD_SIZE
        if old >= 0:
            os.close(old)
        if self._room is not None:
            self._room.opened(seq, fd, zeroed)

    def append(self, parts: list[bytes]) -> JournalPosition:
        """Write ``parts`` (record heads and payloads) with one write at the
        journal's offset; the position past them. Not durable until
        :meth:`sync`. On a failed write, raises ``StorageError`` and
        continues in a new file (the failed one may hold part of it, which
        replay cuts as a torn tail)."""
        try:
            if self._rotate_pending:
                self._open_next()
                self._rotate_pending = False
            elif self._offset >= self.file_bytes:
                self.rotate()
        except OSError as exc:  # this round fails; the next one tries again
            raise StorageError(f"cannot start a new journal file: {exc}") from exc
        buf = b"".join(parts)
        offset = self._offset
        end = offset + len(buf)
        if self._room is not None:
            self._room.reserve(self._seq, end)
        try:
            view = memoryview(buf)
            while view:
                written = os.pwrite(self._fd, view, offset)
                view = view[written:]
                offset += written
        except OSError as exc:
            self._rotate_pending = True
            raise StorageError(f"write to the journal failed: {exc}") from exc
        with self._lock:
            self._offset = end
            self.bytes_written += len(buf)
        return JournalPosition(self._seq, end)

    def sync(self) -> JournalPosition:
        """fdatasync what was appended; returns the position it covers.
        Raises ``StorageError`` (EIO): then nothing appended since the last
        good sync is known durable, and appends go on in a new file."""
        with self._lock:
            fd = os.dup(self._fd)
            covered = JournalPosition(self._seq, self._offset)
        try:
            _ledger._datasync(fd)  # the one fdatasync of the data path (tests fail it there)
        except OSError as exc:
            raise StorageError(f"fsync of the journal failed: {exc}") from exc
        finally:
            os.close(fd)
        self.fsync_count += 1
        return covered

    def rotate(self) -> None:
        """Sync the current file, then continue in a new one."""
        self.sync()
        self._open_next()

    def after_failed_sync(self) -> None:
        """Called when :meth:`sync` raised (on any thread): the next
        :meth:`append` (on the writer's thread) starts a new file first."""
        self._rotate_pending = True

    def write_checkpoint(self, position: JournalPosition) -> None:
        """JournalRecord durably that every segment write of a record before
        ``position`` is synced. Raises ``OSError``."""
        data = _CHECKPOINT.pack(_CHECKPOINT_MAGIC, position.seq, position.offset)
        data += struct.pack(">I", _crc(data))
        tmp = self.directory / f"{CHECKPOINT}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.directory / CHECKPOINT)
        fsync_dir(self.directory)

    def trim(self, position: JournalPosition) -> int:
        """Delete the journal files wholly before ``position`` (call after
        :meth:`write_checkpoint` of it); how many went."""
        removed = 0
        for seq in journal_files(self.directory):
            if seq >= position.seq or seq >= self._seq:
                break
            try:
                os.unlink(file_path(self.directory, seq))
                removed += 1
            except FileNotFoundError:
                pass
        return removed

    def file_count(self) -> int:
        """Journal files up to the current one (not a next one made ready)."""
        return len([seq for seq in journal_files(self.directory) if seq <= self._seq])

    def close(self, *, remove: bool) -> None:
        """Close the current file; with ``remove`` (a clean stop whose last
        checkpoint covered everything) delete the whole journal. The lock
        goes last: until then no other process replays it."""
        if self._room is not None:
            self._room.close()
        with self._lock:
            fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
        if remove:
            for name in os.listdir(self.directory):
                if name != LOCK:
                    os.unlink(self.directory / name)
            os.unlink(self.directory / LOCK)
            os.rmdir(self.directory)
            fsync_dir(self.directory.parent)
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
