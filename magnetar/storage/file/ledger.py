"""One ledger: an append-only segment file of framed entries.

Layout: ``<data_dir>/ledgers/<ledger_id:020d>.log`` holds the entries'
records (``[u32 length][u32 crc32c(data)][data]``, :mod:`..framing`), one
per entry; entry ids are 0, 1, 2... in file order.

The offset index lives in memory: ``ends[i]`` is the file offset just past
entry ``i`` (entry ``i`` starts at ``ends[i-1]``, or 0). Sealing writes it to
``<ledger_id:020d>.idx`` (written under ``seal-tmp/``, fsynced, then
atomically renamed into place):
``b"MGLX" u32 version u64 count u64 data_size`` + ``count`` big-endian u64
ends + ``u32 crc32c`` of everything before, so a sealed ledger reopens
without reading its data. A ledger without a valid index is recovered by
scanning: the scan stops at the first short, zero-length or CRC-bad record
and the file is truncated there (the torn tail a ``kill -9`` or power loss
leaves behind).

States: ``OPEN`` accepts writes; ``CLOSED`` is sealed (its index is on disk,
its last entry id is final); ``FENCED`` refuses writes (after a failed write,
or when recovery takes the ledger away from a writer) and may still be read
and sealed.

Threading: writes, syncs, seals and truncations run on one thread at a time
(the group-commit writer, or startup code before the ledger is shared). Reads
may run on any thread concurrently with writes: they use ``os.pread`` and only
touch entries that are already written, whose index slots never change.
"""
from __future__ import annotations

import enum
import os
import secrets
import struct
import sys
from array import array
from bisect import bisect_right
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from ..errors import CorruptLedgerError, LedgerFencedError, StorageError
from ..framing import HEADER, HEADER_SIZE, MAX_ENTRY_SIZE, crc as _crc, parse_frames
from . import round_io
from .handles import FileHandles, Handle

#: The pool of ledgers opened without one (tests, tools): never closes an idle file.
UNBOUNDED = FileHandles(capacity=1 << 30)

_INDEX_HEAD = struct.Struct(">4sIQQ")
_INDEX_MAGIC = b"MGLX"
_INDEX_VERSION = 1
_SCAN_CHUNK = 8 * 1024 * 1024


class PreparedWrite(NamedTuple):
    """Records ready for a segment file (``Ledger.prepare_write``): the
    bytes, and the file offset past each entry once written."""
    buf: bytes
    ends: list[int]


class LedgerState(str, enum.Enum):
    OPEN = "open"
    CLOSED = "closed"
    FENCED = "fenced"


def ledger_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "ledgers"


def log_path(directory: Path, ledger_id: int) -> Path:
    return Path(directory) / f"{ledger_id:020d}.log"


def index_path(directory: Path, ledger_id: int) -> Path:
    return Path(directory) / f"{ledger_id:020d}.idx"


#: Where indexes are written before their rename: a small directory, so
#: deleting a ledger finds its leftovers there without listing the ledger
#: directory, which holds two or three files per ledger (300,000 names at
#: 100,000 topics: a listing took longer than the rest of a topic's load).
SEAL_TMP = "seal-tmp"


def fsync_dir(directory: Path) -> None:
    """Make a create, rename or unlink in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_datasync = getattr(os, "fdatasync", os.fsync)


class Ledger:
    """A segment file plus its offset index. See the module docstring."""

    #: Never asks for a rollover (``LedgerHandle.full``): the managed
    #: ledger's entry and byte limits bound a segment file.
    full = False
    #: Nor says one is near (``LedgerHandle.nearly_full``): no ledger is prepared ahead.
    nearly_full = False

    def __init__(self, ledger_id: int, directory: Path, handle: Handle, ends: array, state: LedgerState):
        self.ledger_id = ledger_id
        self.directory = Path(directory)
        self.state = state
        #: The segment file's descriptor, from a bounded pool (handles.py):
        #: closed while idle, opened again on use; pinned while in use.
        self._handle = handle
        self._ends = ends
        self._size = ends[-1] if ends else 0

    # ------------------------------------------------------------------ open

    @classmethod
    def create(cls, directory: Path, ledger_id: int, handles: FileHandles | None = None) -> "Ledger":
        """Create an empty OPEN ledger. The new file's directory entry is fsynced.

        Raises ``FileExistsError`` if the ledger already exists (ids never
        repeat, so that means two writers share a data directory).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        handle = (handles or UNBOUNDED).open(str(log_path(directory, ledger_id)),
                                             os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        try:
            fsync_dir(directory)
        except BaseException:
            handle.close()
            raise
        return cls(ledger_id, directory, handle, array("Q"), LedgerState.OPEN)

    @classmethod
    def recover(cls, directory: Path, ledger_id: int, handles: FileHandles | None = None) -> "Ledger":
        """Open a ledger that may not have been sealed (its writer may have crashed).

        With a valid index the ledger was sealed: it comes back CLOSED.
        Otherwise the file is scanned, cut after the last complete record
        (and that cut fsynced), and the ledger comes back OPEN.
        Raises ``FileNotFoundError`` if the segment file does not exist.
        """
        handle = (handles or UNBOUNDED).open(str(log_path(directory, ledger_id)), os.O_RDWR | os.O_APPEND)
        try:
            fd = handle.acquire()
            try:
                file_size = os.fstat(fd).st_size
                ends = _load_index(index_path(directory, ledger_id), file_size)
                if ends is not None:
                    return cls(ledger_id, directory, handle, ends, LedgerState.CLOSED)
                ends, valid = _scan(fd, file_size)
                if valid != file_size:
                    os.ftruncate(fd, valid)
                    os.fsync(fd)
                return cls(ledger_id, directory, handle, ends, LedgerState.OPEN)
            finally:
                handle.release()
        except BaseException:
            handle.close()
            raise

    @classmethod
    def open_sealed(cls, directory: Path, ledger_id: int, entries: int,
                    handles: FileHandles | None = None) -> "Ledger":
        """Open a ledger that metadata says was sealed with ``entries`` entries.

        Uses the index file when valid, otherwise scans (never modifying the
        file). Raises ``CorruptLedgerError`` if fewer entries are found, and
        ``FileNotFoundError`` if the file is missing.
        """
        handle = (handles or UNBOUNDED).open(str(log_path(directory, ledger_id)), os.O_RDONLY)
        try:
            fd = handle.acquire()
            try:
                file_size = os.fstat(fd).st_size
                ends = _load_index(index_path(directory, ledger_id), file_size)
                if ends is None:
                    ends, _ = _scan(fd, file_size, limit=entries)
            finally:
                handle.release()
            if len(ends) < entries:
                raise CorruptLedgerError(
                    f"ledger {ledger_id}: metadata says {entries} entries, file holds {len(ends)}"
                )
            del ends[entries:]
            return cls(ledger_id, directory, handle, ends, LedgerState.CLOSED)
        except BaseException:
            handle.close()
            raise

    # ----------------------------------------------------------------- state

    @property
    def entry_count(self) -> int:
        return len(self._ends)

    @property
    def last_entry_id(self) -> int:
        """Id of the last entry; -1 when empty."""
        return len(self._ends) - 1

    @property
    def size(self) -> int:
        """Bytes in the segment file (records including their headers)."""
        return self._size

    def fence(self) -> None:
        """Refuse further writes. Idempotent; a CLOSED ledger stays CLOSED."""
        if self.state is LedgerState.OPEN:
            self.state = LedgerState.FENCED

    # ---------------------------------------------------------------- writes

    def write_entries(self, datas: list[bytes]) -> bytes:
        """Append ``datas`` as consecutive entries with a single write();
        returns the bytes written (what the journal records of the batch).

        Not durable until :meth:`sync`. On failure the file is cut back to
        where it was, the ledger is FENCED and ``StorageError`` is raised.
        Raises ``LedgerFencedError`` if the ledger is not OPEN.
        """
        write = self.prepare_write(datas)
        fd = self._use()  # before any byte: a file that cannot be opened changes nothing
        try:
            self._handle.written()
            view = memoryview(write.buf)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            raise self.write_failed(exc) from exc
        finally:
            self._handle.release()
        self.write_done(write)
        return write.buf

    def prepare_write(self, datas: list[bytes]) -> "PreparedWrite":
        """The records of ``datas`` as the next entries, nothing written
        yet: the first half of :meth:`write_entries`, for a writer that
        writes many ledgers' records in one call (:mod:`.round_io`), then
        calls :meth:`write_done` or raises :meth:`write_failed`. Raises
        ``LedgerFencedError`` if the ledger is not OPEN, ``ValueError`` for
        an empty or oversized entry."""
        if self.state is not LedgerState.OPEN:
            raise LedgerFencedError(f"ledger {self.ledger_id} is {self.state.value}")
        # map/slice assignment keep the per-entry work in C (this is the hot path)
        lens = list(map(len, datas))
        if lens and (min(lens) == 0 or max(lens) > MAX_ENTRY_SIZE):
            raise ValueError(f"entry sizes must be in 1..{MAX_ENTRY_SIZE}")
        parts: list = [None] * (2 * len(lens))
        parts[::2] = map(HEADER.pack, lens, map(_crc, datas))
        parts[1::2] = datas
        new_ends = list(accumulate([n + HEADER_SIZE for n in lens], initial=self._size))
        del new_ends[0]
        return PreparedWrite(b"".join(parts), new_ends)

    def write_done(self, write: "PreparedWrite") -> None:
        """The prepared records are in the file (not synced): they are entries now."""
        if write.ends:
            self._ends.extend(write.ends)
            self._size = write.ends[-1]

    def write_failed(self, exc: OSError) -> StorageError:
        """The prepared records' write failed: cut the file back, fence the
        ledger; the error to raise."""
        self._fail(self.entry_count)
        return StorageError(f"write to ledger {self.ledger_id} failed: {exc}")

    @property
    def handle(self) -> Handle:
        """The segment file's handle in its pool (a writer that acquires
        many ledgers' descriptors at once: ``FileHandles.acquire_all``)."""
        return self._handle

    def sync(self) -> None:
        """fdatasync the segment file; raises StorageError if it fails.

        After a failed fsync nothing since the last good one can be trusted;
        the caller cuts those entries with :meth:`rollback_to`.
        """
        handle = self._handle
        fd = self._use()
        try:
            mark = handle.dirty_mark()
            _datasync(fd)
            handle.synced(mark)
        except OSError as exc:
            raise StorageError(f"fsync of ledger {self.ledger_id} failed: {exc}") from exc
        finally:
            handle.release()

    def sync_if_open(self) -> bool:
        """fdatasync from a thread other than the writer's, unless the file
        was closed meanwhile (a sealed ledger was synced by its seal).
        Returns whether it synced; raises StorageError if the sync failed."""
        if self._handle.closed:
            return False
        try:
            self.sync()
        except StorageError:
            if self._handle.closed:
                return False  # closed meanwhile: sealed (and synced) by its seal
            raise
        return True

    def rollback_to(self, count: int) -> None:
        """Forget entries from ``count`` on and fence the ledger (after a failed
        write or fsync whose outcome is unknown). Best effort on the file."""
        self._fail(count)

    def _fail(self, count: int) -> None:
        self.fence()
        del self._ends[count:]
        self._size = self._ends[-1] if self._ends else 0
        try:
            fd = self._use()
        except StorageError:
            return  # the index is the truth; a later scan or the seal's index ignores the tail
        try:
            os.ftruncate(fd, self._size)
        except OSError:
            pass  # the index is the truth; a later scan or the seal's index ignores the tail
        finally:
            self._handle.release()

    def seal(self) -> tuple[int, int]:
        """fsync, write the index file, become CLOSED. Returns (entries, size).

        Works on OPEN and FENCED ledgers; idempotent on CLOSED ones. A file
        longer than the index (after a failed write) is cut to the index.
        Raises StorageError if the disk refuses.
        """
        if self.state is LedgerState.CLOSED:
            return self.entry_count, self._size
        self.fence()
        fd = self._use()
        try:
            if os.fstat(fd).st_size != self._size:
                os.ftruncate(fd, self._size)
            mark = self._handle.dirty_mark()
            os.fsync(fd)
            self._handle.synced(mark)
            _write_index(self.directory, self.ledger_id, self._ends)
        except OSError as exc:
            raise StorageError(f"sealing ledger {self.ledger_id} failed: {exc}") from exc
        finally:
            self._handle.release()
        self.state = LedgerState.CLOSED
        return self.entry_count, self._size

    # ----------------------------------------------------------------- reads

    def range_bytes(self, first: int, last: int) -> int:
        """Bytes on disk of entries ``first..last`` (inclusive)."""
        ends = self._ends
        return ends[last] - (ends[first - 1] if first else 0)

    def last_within(self, first: int, last: int, nbytes: int) -> int:
        """The highest id in ``first..last`` such that entries ``first..id``
        fit in ``nbytes`` on disk; at least ``first``."""
        start = self._ends[first - 1] if first else 0
        return max(first, bisect_right(self._ends, start + nbytes, first, last + 1) - 1)

    def read_range(self, first: int, last: int) -> list[bytes]:
        """Entries ``first..last`` (inclusive, all written) with one pread.

        Raises ``IndexError`` for entries that do not exist,
        ``CorruptLedgerError`` if a record fails its CRC, and
        ``StorageError`` if the ledger was closed.
        """
        ends = self._ends
        if first < 0 or last >= len(ends) or first > last:
            raise IndexError(f"ledger {self.ledger_id} has no entries {first}..{last}")
        start = ends[first - 1] if first else 0
        length = ends[last] - start
        fd = self._use()
        try:
            buf = os.pread(fd, length, start)
        except OSError as exc:
            raise StorageError(f"reading ledger {self.ledger_id} failed: {exc}") from exc
        finally:
            self._handle.release()
        if len(buf) != length:
            raise CorruptLedgerError(f"ledger {self.ledger_id}: short read at offset {start}")
        # One call for the whole run (compiled: no Python step per entry).
        # Each record's CRC is checked, and together the records must span
        # exactly the index's range.
        try:
            out = parse_frames(buf, last - first + 1)
        except ValueError as exc:
            raise CorruptLedgerError(f"ledger {self.ledger_id}: {exc} (of a read from offset {start})") from None
        if sum(map(len, out)) + HEADER_SIZE * len(out) != length:
            raise CorruptLedgerError(f"ledger {self.ledger_id}: records do not fill entries {first}..{last}")
        return out

    def read(self, entry_id: int) -> bytes:
        return self.read_range(entry_id, entry_id)[0]

    # ------------------------------------------------------------- lifetime

    def _use(self) -> int:
        """The segment file's descriptor, pinned until ``self._handle.release()``.
        StorageError if the ledger was closed or the file cannot be opened
        again (no descriptor left: EMFILE; the caller may retry)."""
        try:
            return self._handle.acquire()
        except ValueError:
            raise StorageError(f"ledger {self.ledger_id} is closed") from None
        except OSError as exc:
            raise StorageError(f"cannot open ledger {self.ledger_id}'s file: {exc}") from exc

    def close(self) -> None:
        """Close the file once no read or write is in flight. Idempotent. Does not seal."""
        self._handle.close()

    def delete_files(self, *, keep_fence: bool = False) -> None:
        """Close and unlink the segment and index files (missing files are fine)."""
        self.close()
        delete_ledger_files(self.directory, self.ledger_id, keep_fence=keep_fence)


def fence_path(directory: Path, ledger_id: int) -> Path:
    return Path(directory) / f"{ledger_id:020d}.fenced"


def write_fence(directory: Path, ledger_id: int) -> None:
    """Mark ledger ``ledger_id`` fenced, durably, before a new owner reads its end.

    The marker is how a previous owner that is still running (paused past its
    session, a zombie) learns it lost the ledger *in the data path*: it checks
    for the marker after every fsync and before it acknowledges anything.
    Either its fsync happened before the marker existed (then the new owner,
    which recovers after writing the marker, reads those entries), or it sees
    the marker and acknowledges nothing.
    """
    path = fence_path(directory, ledger_id)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def is_fenced(directory: Path, ledger_id: int) -> bool:
    return os.path.exists(os.path.join(directory, f"{ledger_id:020d}.fenced"))


def fenced_among(directory: str, ledger_ids: list[int]) -> list[bool]:
    """:func:`is_fenced` for each of ``ledger_ids``, in one call
    (:func:`.round_io.exist`): a group commit's check of the ledgers it wrote."""
    return round_io.exist([os.path.join(directory, f"{ledger_id:020d}.fenced") for ledger_id in ledger_ids])


def delete_ledger_files(directory: Path, ledger_id: int, *, keep_fence: bool = False) -> None:
    """Unlink the ledger's files, with any temporary index a crash in the
    middle of a seal left behind (``SEAL_TMP``). Never lists ``directory``:
    its cost does not grow with the number of ledgers. With ``keep_fence``
    the fence marker stays (see ``LedgerBackend.delete``)."""
    tmp_dir = Path(directory) / SEAL_TMP
    prefix = f"{index_path(directory, ledger_id).name}."
    try:
        leftovers = [tmp_dir / n for n in os.listdir(tmp_dir) if n.startswith(prefix) and n.endswith(".tmp")]
    except FileNotFoundError:
        leftovers = []
    fence = () if keep_fence else (fence_path(directory, ledger_id),)
    for path in (log_path(directory, ledger_id), index_path(directory, ledger_id), *fence, *leftovers):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _scan(fd: int, file_size: int, limit: int | None = None) -> tuple[array, int]:
    """Offsets past each intact record from the start; and where they stop."""
    ends = array("Q")
    pos = 0
    buf = b""
    buf_start = 0
    unpack = HEADER.unpack_from
    while limit is None or len(ends) < limit:
        rel = pos - buf_start
        if len(buf) - rel < HEADER_SIZE:
            buf = os.pread(fd, _SCAN_CHUNK, pos)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                break
        n, checksum = unpack(buf, rel)
        if n == 0 or pos + HEADER_SIZE + n > file_size:
            break
        if len(buf) - rel < HEADER_SIZE + n:
            buf = os.pread(fd, max(_SCAN_CHUNK, HEADER_SIZE + n), pos)
            buf_start, rel = pos, 0
            if len(buf) < HEADER_SIZE + n:
                break
        if _crc(buf[rel + HEADER_SIZE : rel + HEADER_SIZE + n]) != checksum:
            break
        pos += HEADER_SIZE + n
        ends.append(pos)
    return ends, pos


def _write_index(directory: Path, ledger_id: int, ends: array) -> None:
    body = array("Q", ends)
    if sys.byteorder == "little":
        body.byteswap()
    data = _INDEX_HEAD.pack(_INDEX_MAGIC, _INDEX_VERSION, len(ends), ends[-1] if ends else 0) + body.tobytes()
    data += struct.pack(">I", _crc(data))
    final = index_path(directory, ledger_id)
    # A temporary name of this writer's own: on shared storage an owner
    # closing a ledger it just lost and the new owner recovering it may seal
    # it at the same moment. With one shared name, one's O_TRUNC cut the
    # other's file, and the second rename found it gone. Both write the same
    # index (the fence makes them agree on the entries), so whichever rename
    # comes last leaves a whole one.
    tmp = Path(directory) / SEAL_TMP / f"{final.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileNotFoundError:
        tmp.parent.mkdir(exist_ok=True)  # the first seal in this directory
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)


def _load_index(path: Path, file_size: int) -> array | None:
    """The ends array from a valid index file, or None (missing or invalid)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    head = _INDEX_HEAD.size
    if len(data) < head + 4:
        return None
    magic, version, count, data_size = _INDEX_HEAD.unpack_from(data)
    if magic != _INDEX_MAGIC or version != _INDEX_VERSION or len(data) != head + 8 * count + 4:
        return None
    if struct.unpack_from(">I", data, len(data) - 4)[0] != _crc(data[:-4]):
        return None
    if data_size > file_size:
        return None
    ends = array("Q")
    ends.frombytes(data[head:-4])
    if sys.byteorder == "little":
        ends.byteswap()
    if (ends[-1] if count else 0) != data_size:
        return None
    return ends
