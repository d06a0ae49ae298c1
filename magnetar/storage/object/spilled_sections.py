"""A writer's commit objects kept on local disk, so that every ledger it
seals is compacted into chunks from them: no GET, no index object.

The memory keeper (:mod:`.kept_sections`) holds 16 MiB: at 10,000 written
topics it keeps almost no ledger whole, so nearly every one was indexed
(:mod:`.ledger_index`), and a lone consumer's cold backfill of an indexed
ledger costs a ranged GET per section, one per entry at that shape
(docs/object-storage.md, "What is not done yet"). Here every commit's
whole object is appended to a **spill segment** under the broker's data
directory (one ``pwrite`` per commit, no fsync: a cache, never needed for
durability; the commit never waits for it, and a failure to write only
keeps less), and an array indexed by the commit's sequence number (from
its key: 8 bytes a commit, not a dict entry and a string each, which at
10,000 topics and 2 GiB came to ~250,000 commits and tens of MB) names
where each commit object begins. A ledger's
sections are in memory already (its ``SectionColumns``: key, offset,
length), so its bytes are a slice of a mapped segment per section: nothing is held per
section.

Bounds: segments of ``segment_bytes``, the oldest deleted once they hold
more than ``max_bytes`` in all; a ledger larger than ``ledger_max_bytes``
is not taken (its sections are large: compacted from the store, a GET per
large section, as before). The directory is emptied at start: nothing in
it belongs to anyone after a restart (a new session, new object keys).

:meth:`SpilledSections.take` hands a sealed ledger's compaction a reader
(:class:`SpillRead`) whose ``parts`` finds each section's place (when the
compaction reads, not at the seal: nothing is held per section while it
waits; by whole columns, no Python step per section), gathers the sections
back to back in a thread (:func:`gather_sections`: compiled, the copies and
CRCs without the GIL; page cache reads, but a disk may block) and checks
each entry's CRC32C and the section's length: a section whose segment is
gone (past the bound), or whose bytes are short or damaged, makes the whole
ledger "not kept" (None), and its compaction takes today's path (indexed or
from the store). No exception leaves this module but for a bug: an
``OSError`` writing is logged and that segment given up.
"""
from __future__ import annotations

import asyncio
import logging
import mmap
import os
import shutil
import sys
from array import array
from collections import OrderedDict
from functools import lru_cache
from itertools import accumulate, repeat
from operator import rshift
from pathlib import Path
from typing import Iterator

from ...protocol.compiled import hot as _hot
from ..framing import HEADER_SIZE, parse_frames_python
from .kept_sections import LEDGER_KEEP_BYTES, KeptBytes, SealedLedger
from .section_columns import SectionColumns

log = logging.getLogger(__name__)

#: A spill segment's size (the last commit written to it may pass it).
SEGMENT_BYTES = 64 * 1024 * 1024
#: Where a commit object begins, packed: segment << OFFSET_BITS | offset.
OFFSET_BITS = 40
_OFFSET_MASK = (1 << OFFSET_BITS) - 1
_GONE = array("q", [-1])


#: Commit keys whose sequence numbers :func:`_key_seq` remembers (~200
#: bytes each, the key shared with the sections naming it): a commit carries
#: a section of hundreds of ledgers, which roll over within minutes of
#: each other, so most of a ledger's keys were parsed by the reads before.
KEYS_REMEMBERED = 1 << 15


@lru_cache(maxsize=KEYS_REMEMBERED)
def _key_seq(key: str) -> tuple[str, int | None]:
    """Commit object ``key``'s prefix and sequence number (``<prefix>/<name>-<seq>``;
    None if it has none). Parsed once per key: a read does this for each of
    its ledger's sections (1,000 at a rollover), and parsing each anew was
    most of its time on the loop at 10,000 topics."""
    prefix, _, name = key.rpartition("/")
    _, dash, seq = name.rpartition("-")
    return sys.intern(prefix), (int(seq) if dash and seq.isdigit() else None)


class SpilledSections:
    """The disk keeper (:class:`~.kept_sections.SectionKeeper`; the module docstring)."""

    per_section = False  # a section's bytes are found from its ledger's section list

    def __init__(self, directory: Path, max_bytes: int, *, segment_bytes: int = SEGMENT_BYTES,
                 ledger_max_bytes: int = LEDGER_KEEP_BYTES) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        # At least four segments fit the bound: deleting one gives up a quarter at most.
        self.segment_bytes = max(1, min(segment_bytes, max_bytes // 4))
        self.ledger_max_bytes = ledger_max_bytes
        self.bytes = 0  # in the segments on disk
        #: Counters: ledgers whose bytes were read whole, and those that fell back (gone, damaged, too large).
        self.taken = 0
        self.missed = 0
        self._ledgers: set[int] = set()  # started here, not taken or dropped
        #: The commit objects' keys are ``<prefix>/<ms>-<seq>``, one prefix (the
        #: committer's session); where commit ``seq`` begins is ``_pos[seq - _base]`` (-1: not here).
        self._prefix: str | None = None
        self._base = 0
        self._pos = array("q")
        self._segments: OrderedDict[int, array] = OrderedDict()  # segment -> its commits' seqs, oldest first
        self._sizes: dict[int, int] = {}  # segment -> bytes written to it
        self._fd: int | None = None  # the segment written now (the last of ``_segments``)
        self._size = 0  # of that segment
        self._next = 0  # the next segment's number: never reused in a keeper's life
        self._failing = False  # a write failed: said once until one succeeds
        #: segment -> its map, made by the first read of it (a worker thread)
        #: and kept until the segment is deleted: a map per read cost an
        #: ``open``, ``mmap`` and ``munmap`` per segment per ledger.
        self.maps: dict[int, mmap.mmap] = {}
        self._wipe()

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:08d}.spill"

    def _wipe(self) -> None:
        """Empty the directory (a new session: nothing in it is anyone's)."""
        try:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("object spill directory %s: %s (ledgers are compacted from the store)", self.directory, exc)

    # ------------------------------------------------------------ writes

    def start(self, ledger_id: int) -> None:
        self._ledgers.add(ledger_id)

    def add(self, ledger_id: int, framed: bytes) -> None:
        pass  # per_section is False: never called by the committer

    def wrote(self, key: str, blob: bytes) -> None:
        """Append commit object ``key``'s bytes; errors are logged, never raised."""
        if not self._ledgers:
            return  # nothing of it would be taken (no ledger of ours open)
        if self._prefix is None:
            self._prefix = key.rpartition("/")[0]
        seq = self._seq(key)
        if seq is None or seq < self._base:
            return  # not a key of ours (never: one committer), or older than what is kept
        try:
            if self._fd is None or (self._size and self._size + len(blob) > self.segment_bytes):
                self._roll()
            os.pwrite(self._fd, blob, self._size)  # at an explicit offset: a short write can't shift the next
            segment = next(reversed(self._segments))
            pos, i = self._pos, seq - self._base
            if i >= len(pos):  # commits end out of order (pipelined PUTs), and retries skip seqs
                pos.extend(_GONE * (i + 1 - len(pos)))
            pos[i] = (segment << OFFSET_BITS) | self._size
            self._segments[segment].append(seq)
            self._size += len(blob)
            self._sizes[segment] = self._size
            self.bytes += len(blob)
            self._failing = False
        except OSError as exc:
            if not self._failing:
                log.warning("object spill %s: %s (ledgers are compacted from the store meanwhile)",
                            self.directory, exc)
            self._failing = True
            self._close_fd()  # the next commit begins a new segment
            return
        while self.bytes > self.max_bytes and len(self._segments) > 1:
            self._delete_oldest()

    def _roll(self) -> None:
        self._close_fd()
        segment = self._next
        self._next += 1
        self.directory.mkdir(parents=True, exist_ok=True)  # removed under us: made again
        self._fd = os.open(self._path(segment), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self._segments[segment] = array("q")
        self._sizes[segment] = 0
        self._size = 0

    def _close_fd(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None

    def _seq(self, key: str) -> int | None:
        prefix, seq = _key_seq(key)
        return seq if prefix == self._prefix else None

    def _delete_oldest(self) -> None:
        segment, seqs = self._segments.popitem(last=False)
        pos, base = self._pos, self._base
        for seq in seqs:
            pos[seq - base] = -1
        dead = 0  # the commits before the oldest kept one: trimmed (a segment's worth each time)
        while dead < len(pos) and pos[dead] < 0:
            dead += 1
        if dead:
            del pos[:dead]
            self._base += dead
        self.bytes -= self._sizes.pop(segment)
        _unmap(self.maps.pop(segment, None))  # a read under way finds it closed: not kept
        try:
            os.unlink(self._path(segment))
        except OSError:
            pass  # gone already

    # ------------------------------------------------------------- takes

    def take(self, ledger: SealedLedger) -> KeptBytes | None:
        """A reader of the sealed ``ledger``'s sections, if it was started here
        and is within ``ledger_max_bytes`` (else None: counted in ``missed``).
        Whether every commit object it is in is still spilled is found when
        it reads (:meth:`SpillRead.parts`)."""
        lid = ledger.ledger_id
        if lid not in self._ledgers:
            return None
        self._ledgers.discard(lid)
        sections = ledger.sections
        if ledger.size > self.ledger_max_bytes or not len(sections):
            self.missed += 1
            return None
        # Where each section lies is looked up by the read, not here: a plan
        # made at the seal lived until the compaction, a tuple per section,
        # and a broker closing after 10,000 written topics seals them all at
        # once (its heap grew by a GB while it stopped), most of them
        # compactions it then cancels.
        return SpillRead(self, sections)

    def _places(self, sections: SectionColumns) -> array | None:
        """Where the commit object of each section begins in the spill
        (``segment << OFFSET_BITS | position``); None if one is no longer
        spilled (past the bound, its write failed) or not ours
        (:func:`spill_places`: compiled, no Python step per section; one
        per section was ~1.5 ms of the event loop per compaction at 10,000
        written topics, ~30 compactions a second)."""
        if self._prefix is None:
            return None
        return spill_places(sections.keys, self._prefix, self._pos, self._base)

    def drop(self, ledger_id: int) -> None:
        self._ledgers.discard(ledger_id)

    def clear(self) -> None:
        self._close_fd()
        for view in list(self.maps.values()):
            _unmap(view)
        self.maps.clear()
        self._ledgers.clear()
        self._prefix = None
        self._base = 0
        self._pos = array("q")
        self._segments.clear()
        self._sizes.clear()
        self.bytes = 0
        self._wipe()


class SpillRead:
    """One sealed ledger's sections in the spill (:class:`~.kept_sections.KeptBytes`)."""

    __slots__ = ("keeper", "sections")

    def __init__(self, keeper: SpilledSections, sections: SectionColumns) -> None:
        self.keeper, self.sections = keeper, sections

    async def parts(self) -> "JoinedSections | None":
        keeper, sections = self.keeper, self.sections
        places = keeper._places(sections)  # on the loop: the writes move the positions
        if places is None:
            keeper.missed += 1
            return None
        segments = set(map(rshift, places, repeat(OFFSET_BITS)))
        sizes = {segment: keeper._sizes.get(segment, -1) for segment in segments}  # written so far
        paths = {segment: keeper._path(segment) for segment in segments}
        blob = await asyncio.to_thread(read_sections, paths, sizes, keeper.maps, places, sections)
        for segment in [s for s in keeper.maps if s not in keeper._sizes]:
            _unmap(keeper.maps.pop(segment))  # mapped by the read as it was being deleted
        if blob is None:
            keeper.missed += 1
            return None
        keeper.taken += 1
        return JoinedSections(blob, sections.lengths)


class JoinedSections:
    """A ledger's kept sections as one buffer (:class:`~.kept_sections.KeptBytes`'
    ``parts``): item ``i`` is section ``i``'s bytes, a slice is a one-item
    list holding those sections' bytes (what a chunk joins), so the
    compactor slices no section by section."""

    __slots__ = ("blob", "_ends")

    def __init__(self, blob: bytes, lengths) -> None:
        self.blob = blob
        self._ends = list(accumulate(lengths))

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i):
        ends = self._ends
        if isinstance(i, slice):
            start, stop, step = i.indices(len(ends))
            if step != 1:
                raise ValueError("sections are sliced in order")
            if start >= stop:
                return []
            a, b = (ends[start - 1] if start else 0), ends[stop - 1]
            return [self.blob if (a, b) == (0, len(self.blob)) else memoryview(self.blob)[a:b]]
        if i < 0:
            i += len(ends)
        if not 0 <= i < len(ends):
            raise IndexError("section index out of range")
        return self.blob[(ends[i - 1] if i else 0):ends[i]]

    def __iter__(self) -> Iterator[bytes]:
        return (self[i] for i in range(len(self._ends)))

    def __eq__(self, other: object) -> bool:
        try:
            return list(self) == list(other)  # type: ignore[call-overload]
        except TypeError:
            return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def read_sections(paths: dict[int, Path], sizes: dict[int, int], maps: dict[int, mmap.mmap],
                  places: array, sections: SectionColumns) -> bytes | None:
    """The sections' bytes back to back (:func:`gather_sections`), every
    entry's CRC32C and each section's length checked; None if a segment is
    gone or any section is short or damaged. Blocking: run in a thread.
    ``sizes``: each segment's bytes written (-1: deleted); ``maps``:
    segment -> its map, shared with later reads (the keeper's; a map is
    made here when missing or shorter than the segment: the one written now
    grows).

    The sections are copied from mapped segments, not read with a ``pread``
    each: every ``pread`` gives up the GIL and must take it back from the
    busy event loop, which waits out the switch interval (5 ms) each time,
    so a ledger of 1,000 sections took seconds to read at 10,000 written
    topics (py-spy: most of the worker threads' samples in ``pread``)."""
    try:
        for segment, size in sizes.items():
            if size < 0:
                return None
            view = maps.get(segment)
            if view is None or view.closed or len(view) < size:
                with open(paths[segment], "rb") as file:
                    fresh = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
                if view is not None and not view.closed and maps.get(segment) is view:
                    maps[segment] = fresh  # the old map stays for a read that holds it; freed with it
                else:
                    maps.setdefault(segment, fresh)
        return gather_sections(maps, places, sections.offsets, sections.lengths, sections.counts)
    except (OSError, ValueError):  # gone, closed by a deletion, or empty (mmap of 0 bytes)
        return None


def spill_places_python(keys: list[str], prefix: str, pos: array, base: int) -> array | None:
    """The pure-Python twin of the compiled ``spill_places``
    (``magnetar/protocol/_hot_gather.c``): for each key
    ``<prefix>/<name>-<seq>`` (ASCII), ``pos[seq - base]``; None if a key
    is not of that form under ``prefix``, its seq is outside ``pos``, or
    its place is negative (not spilled)."""
    places = array("q")
    last, place = None, -1
    for key in keys:
        if key is not last:  # a ledger's sections may share a commit object (not at many topics)
            last = key
            head, seq = _key_seq(key) if key.isascii() else ("", None)  # the writer's keys are ASCII
            i = -1 if seq is None or head != prefix else seq - base
            place = pos[i] if 0 <= i < len(pos) else -1
            if place < 0:
                return None
        places.append(place)
    return places


def _spill_places_compiled(keys: list[str], prefix: str, pos: array, base: int) -> array | None:
    found = _hot.spill_places(keys, prefix, pos, base)
    if found is None:
        return None
    places = array("q")
    places.frombytes(found)
    return places


def gather_sections_python(maps: dict, places, offsets, lengths, counts) -> bytes | None:
    """The pure-Python twin of the compiled ``gather_sections``
    (``magnetar/protocol/_hot_gather.c``): section ``i`` is ``lengths[i]``
    bytes at ``(places[i] & (2**40 - 1)) + offsets[i]`` of map
    ``maps[places[i] >> 40]``, holding exactly ``counts[i]`` stored records
    with their CRCs right; the sections back to back, or None if any is
    not (a segment not mapped, past its map's end, short, damaged)."""
    if not len(places) == len(offsets) == len(lengths) == len(counts):
        raise ValueError("gather_sections: the columns differ in length")
    out = []
    for at, offset, length, count in zip(places, offsets, lengths, counts):
        view = maps.get(at >> OFFSET_BITS)
        position = (at & _OFFSET_MASK) + offset
        if view is None or min(at, offset, length, count) < 0 or position + length > len(view):
            return None
        buf = bytes(view[position:position + length])
        try:
            entries = parse_frames_python(buf, count)
        except ValueError:
            return None
        if sum(map(len, entries)) + HEADER_SIZE * count != length:
            return None  # more bytes than its entries: not this section
        out.append(buf)
    return b"".join(out)


#: Compiled when built (no Python step per section; the copies without the GIL).
gather_sections = _hot.gather_sections if _hot is not None else gather_sections_python
spill_places = _spill_places_compiled if _hot is not None else spill_places_python


def _unmap(view: mmap.mmap | None) -> None:
    if view is not None:
        try:
            view.close()
        except (BufferError, ValueError):  # exported, or closed already
            pass