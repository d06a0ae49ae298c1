"""Commit objects copied to local disk once, so that the ledgers this
broker opened from the store (a takeover's recoveries, loads after a move)
are compacted into chunks, each commit object read by one GET for all.

At small sections such a ledger used to be indexed (:mod:`.ledger_index`:
no data moved), and a lone cold read of it costs a ranged GET per section:
at the store's GET rate, far under half of files (10,000 topics after a
kill -9: ~2,000-3,000 entries/s against files' ~100,000). Chunking them
from the store with a lockstep does not help either: a takeover loads
topics in waves (256 at a time), every wave's ledgers have sections in
nearly every commit object of the dead writer, so each wave would read
them all again; and a lockstep of all of them would hold every ledger's
chunk in memory at once.

Here the first compaction that needs a commit object GETs it (from its
start, ``copy_bytes`` at least: a commit object of many small sections is
read whole) and appends it to a **copy segment** under the broker's data
directory (no fsync: a cache, never needed for durability); every later
compaction's ranges of it are read from disk. :meth:`CommitCopies.copy`
brings a ledger's objects here without holding any of their bytes (the
compactions of a whole wave call it at once); :meth:`CommitCopies.fetch`
then reads its ranges (a thread: page cache, but a disk may block) and is
what :func:`~.compactor.compact_ledger` takes as its ``lockstep``.

Bounds: ``max_bytes`` on disk in all, the oldest segment deleted first (a
range of an object no longer here is copied again); at most ``in_flight``
GETs at once. A range past what was copied of its object (a large
object) is one ranged GET of its own. The directory is emptied at start:
nothing in it belongs to anyone after a restart.

Failure modes: a GET's ``ObjectStoreError`` goes to every caller waiting
for that object (the compaction fails, is logged, and is redone when the
ledger is next opened). A disk error writing is logged once and the object
is GET again by each fetch that needs it (nothing lost, only GETs); one
reading is retried from the store.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
from collections import OrderedDict, deque
from pathlib import Path
from typing import Iterable

from ...objectstore.store import ObjectStore

log = logging.getLogger(__name__)

#: A copy segment's size (the last object written to it may pass it).
SEGMENT_BYTES = 64 * 1024 * 1024
#: An object is copied from its start at least this far (to its end if it is shorter).
COPY_BYTES = 1024 * 1024
#: GETs under way at once, at most.
MAX_IN_FLIGHT = 32


class _Segment:
    __slots__ = ("number", "fd", "size", "keys", "readers", "gone")

    def __init__(self, number: int, fd: int) -> None:
        self.number, self.fd = number, fd
        self.size = 0
        self.keys: list[str] = []
        self.readers = 0  # fetches reading it now: its fd stays open until they are done
        self.gone = False  # deleted (past the bound): closed once no one reads it


class CommitCopies:
    """Local copies of commit objects (the module docstring). ``gets``,
    ``bytes``: what went to the store; ``hits``: ranges read from a copy."""

    def __init__(self, objects: ObjectStore, directory: Path, max_bytes: int, *,
                 segment_bytes: int = SEGMENT_BYTES, copy_bytes: int = COPY_BYTES,
                 in_flight: int = MAX_IN_FLIGHT) -> None:
        self.objects = objects
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        # At least four segments fit the bound: deleting one gives up a quarter at most.
        self.segment_bytes = max(1, min(segment_bytes, max_bytes // 4))
        self.copy_bytes = copy_bytes
        self._in_flight = in_flight
        self._queue: deque[str] = deque()  # keys to copy, in the order first asked for
        self._workers: set[asyncio.Task] = set()  # each copies one object at a time: in_flight at most
        self._where: dict[str, tuple[_Segment, int, int]] = {}  # key -> (segment, offset, bytes copied)
        self._copying: dict[str, asyncio.Future] = {}
        self._segments: OrderedDict[int, _Segment] = OrderedDict()  # oldest first; the last is written
        self._next = 0
        self.bytes_on_disk = 0
        self._failing = False
        self.gets = self.bytes = self.hits = 0
        try:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("commit copies %s: %s (objects are read from the store)", self.directory, exc)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    # ------------------------------------------------------------ copying

    async def copy(self, keys: Iterable[str]) -> None:
        """Bring every object of ``keys`` here (those here already, or being
        copied, are not read again). ``ObjectStoreError`` if a GET fails."""
        waits = []
        loop = asyncio.get_running_loop()
        for key in dict.fromkeys(keys):
            if key in self._where:
                continue
            flight = self._copying.get(key)
            if flight is None:
                # A future and a place in the queue, not a task: a takeover's first wave asks
                # for tens of thousands of objects at once, most of them waiting a while.
                flight = self._copying[key] = loop.create_future()
                self._queue.append(key)
            waits.append(flight)
        while self._queue and len(self._workers) < self._in_flight:
            worker = loop.create_task(self._work())
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)
        if waits:
            # Shielded: a compaction cancelled must not cancel a copy others wait for.
            await asyncio.shield(asyncio.gather(*waits))

    async def _work(self) -> None:
        """Copy the queued objects, one at a time, till the queue is empty."""
        while self._queue:
            key = self._queue.popleft()
            flight = self._copying[key]
            try:
                self.gets += 1  # asked of the store (and billed) whether it answers or not
                blob = await self.objects.get(key, 0, self.copy_bytes)  # S3 answers up to the object's end
                self.bytes += len(blob)
                self._write(key, blob)
            except Exception as exc:  # noqa: BLE001 (the store's error goes to whoever waits for it)
                del self._copying[key]
                if not flight.done():
                    flight.set_exception(exc)
                    flight.exception()  # its waiters get it; if they were all cancelled, nothing is logged
                continue
            del self._copying[key]
            if not flight.done():
                flight.set_result(None)

    def _write(self, key: str, blob: bytes) -> None:
        try:
            segment = self._segments[next(reversed(self._segments))] if self._segments else None
            if segment is None or segment.gone or (segment.size and segment.size + len(blob) > self.segment_bytes):
                segment = self._roll()
            # At an explicit offset: a short write can't shift the next.
            if os.pwrite(segment.fd, blob, segment.size) != len(blob):
                raise OSError(f"short write to copy segment {segment.number}")
        except OSError as exc:
            if not self._failing:
                log.warning("commit copies %s: %s (objects are read from the store meanwhile)", self.directory, exc)
            self._failing = True
            return
        self._failing = False
        self._where[key] = (segment, segment.size, len(blob))
        segment.keys.append(key)
        segment.size += len(blob)
        self.bytes_on_disk += len(blob)
        while self.bytes_on_disk > self.max_bytes and len(self._segments) > 1:
            self._delete_oldest()

    def _roll(self) -> _Segment:
        number = self._next
        self._next += 1
        self.directory.mkdir(parents=True, exist_ok=True)  # removed under us: made again
        path = self.directory / f"{number:08d}.copy"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        segment = _Segment(number, fd)
        self._segments[number] = segment
        return segment

    def _delete_oldest(self) -> None:
        _, segment = self._segments.popitem(last=False)
        for key in segment.keys:
            if self._where.get(key, (None,))[0] is segment:
                del self._where[key]
        self.bytes_on_disk -= segment.size
        segment.gone = True
        try:
            os.unlink(self.directory / f"{segment.number:08d}.copy")  # readers keep their fd meanwhile
        except OSError:
            pass
        if not segment.readers:
            _close(segment)

    # ------------------------------------------------------------ reading

    async def fetch(self, ranges: list[tuple[str, int, int]]) -> list[bytes]:
        """The bytes of each ``(key, start, end)`` of ``ranges``, in order:
        copied first if they are not here. ``ObjectStoreError`` as
        :meth:`copy`, or from a ranged GET of a range it could not read here."""
        await self.copy(key for key, _, _ in ranges)
        places: list[tuple[_Segment, int, int] | None] = []
        used: set[_Segment] = set()
        for key, start, end in ranges:
            where = self._where.get(key)
            if where is None or end > where[2]:
                places.append(None)  # not here (a disk error, deleted since) or past the copy
                continue
            segment, offset, _ = where
            places.append((segment, offset + start, end - start))
            used.add(segment)
        for segment in used:
            segment.readers += 1
        try:
            parts = await asyncio.to_thread(_read, places)
        finally:
            for segment in used:
                segment.readers -= 1
                if segment.gone and not segment.readers:
                    _close(segment)
        missing = [i for i, part in enumerate(parts) if part is None]
        self.hits += len(parts) - len(missing)
        if missing:
            got = await asyncio.gather(*(self.objects.get(*ranges[i]) for i in missing))
            self.gets += len(missing)
            for i, blob in zip(missing, got):
                self.bytes += len(blob)
                parts[i] = blob
        return parts

    def clear(self) -> None:
        """Stop copying; close and delete every copy (the backend closes)."""
        for worker in self._workers:
            worker.cancel()
        self._queue.clear()
        for flight in self._copying.values():
            flight.cancel()
        self._copying.clear()
        for segment in self._segments.values():
            segment.gone = True
            if not segment.readers:
                _close(segment)
        self._segments.clear()
        self._where.clear()
        self.bytes_on_disk = 0
        shutil.rmtree(self.directory, ignore_errors=True)


def _read(places: list[tuple[_Segment, int, int] | None]) -> list[bytes | None]:
    """Each place's bytes (None: not here, or short: a disk error)."""
    out: list[bytes | None] = []
    for place in places:
        if place is None:
            out.append(None)
            continue
        segment, offset, length = place
        try:
            blob = os.pread(segment.fd, length, offset)
        except OSError:
            blob = b""
        out.append(blob if len(blob) == length else None)
    return out


def _close(segment: _Segment) -> None:
    if segment.fd >= 0:
        try:
            os.close(segment.fd)
        except OSError:
            pass
        segment.fd = -1
