"""Ranged GETs of commit objects, coalesced: byte ranges of one object
asked for within ``window_s`` of each other are fetched by one GET.

A commit object holds one section per ledger it carried. Reading several
of those ledgers (compacting the ledgers a broker sealed together, a
backfill over a topic's partitions) asks for several sections of each
object; one GET per section would multiply requests (and their bill) by
the number of ledgers. Here every ``get`` queues its range and the first
one queued schedules a flush ``window_s`` later (1 ms: callbacks already
scheduled run first, so readers woken together all queue): per object,
ranges whose gaps are at most ``max_gap`` bytes become one span, one ranged
GET each, and every caller gets its own slice. A lone read costs what it
did plus the window; the bytes between merged ranges are read and dropped
(at most ``max_gap`` per gap). :class:`Lockstep` lines up the fetches of
compactions that run together, so that they come within one window.

Readers of different ledgers rarely come within one window (each loads
its ledger's index first), so a GET that starts within ``whole_bytes``
(256 KiB) of an object's start reads from its start to at least that far
(S3 answers up to the object's end): a small commit object is read whole
for the price of one GET (its first-byte latency dominates), and the
bytes are kept, least recently used first out, up to ``keep_bytes``: the
other ledgers' sections in it are then served from memory. A GET of an
object also covers the ranges of it that compactions on this broker will
fetch (``pending``: :mod:`.pending_sections`; within ``max_gap`` of what was
asked for): a cold read of several ledgers written together (a topic's
partitions) reads each object once, and their compactions take the kept
bytes. Kept bytes of an object that touch or overlap a new GET's are
joined with it. A GET never reads more than ``whole_bytes`` beyond what was
asked for or is pending, and never makes more requests than one per range
would.

Failures: a GET's error (``ObjectStoreError`` and subclasses) goes to every
caller whose range it covered; other spans are not affected. Counters
``gets`` (``chunk_gets`` of them of compacted chunks) and ``bytes`` say
what went to the store.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Callable, Iterable, Protocol

from ...objectstore.store import ObjectStore
from .index import chunk_object_ledger

#: Gaps up to this many bytes between two wanted ranges of one object are read through.
MAX_GAP = 1024 * 1024
#: GETs starting this close to an object's start read it from the start to at least this far.
WHOLE_BYTES = 256 * 1024
#: Bytes of objects read kept for the other ledgers' sections in them (one
#: object's bytes at most half of it: a commit object is up to 8 MiB).
KEEP_BYTES = 32 * 1024 * 1024
#: Bytes of objects a pending compaction will still read (see ``pending``)
#: kept at most: beyond ``KEEP_BYTES`` others' bytes go first, and past this
#: a new one is not kept (its compaction reads it again) rather than an
#: older one, which its compaction needs sooner.
KEEP_PENDING_BYTES = 96 * 1024 * 1024
#: GETs under way at once, at most: a compaction of a ledger of 1,000 small
#: sections must not put 1,000 requests on the loop and the store at once.
MAX_IN_FLIGHT = 32


class PendingRanges(Protocol):
    """The ranges compactions will fetch (:class:`~.pending_sections.PendingSections`)."""

    def __contains__(self, key: str) -> bool:
        """Whether any range of object ``key`` is pending (cheap: asked per kept object)."""
        ...

    def ranges(self, key: str) -> Iterable[tuple[int, int]]:
        """Every pending ``[start, end)`` of object ``key``."""
        ...


class RangeGets:
    def __init__(self, objects: ObjectStore, *, max_gap: int = MAX_GAP, window_s: float = 0.001,
                 whole_bytes: int = WHOLE_BYTES, keep_bytes: int = KEEP_BYTES,
                 pending: PendingRanges | None = None,
                 keep_pending_bytes: int = KEEP_PENDING_BYTES) -> None:
        self.objects = objects
        #: Ranges of an object that will be fetched anyway (see the module docstring).
        self.pending = pending
        self.keep_pending_bytes = keep_pending_bytes
        self.max_gap = max_gap
        self.window_s = window_s
        self.whole_bytes = whole_bytes
        self.keep_bytes = keep_bytes
        self._kept: OrderedDict[str, tuple[int, bytes]] = OrderedDict()  # key -> (offset, bytes read there)
        self._kept_bytes = 0
        self._flying: dict[str, list[_Flight]] = {}  # GETs under way, by object
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.hits = 0  # ranges served from kept bytes or a GET under way
        self._wanted: dict[str, list[tuple[int, int, asyncio.Future]]] = {}
        self._scheduled = False
        self.gets = 0
        self.chunk_gets = 0  # of them, of compacted ledgers' chunk objects
        self.bytes = 0

    def get(self, key: str, start: int, end: int) -> "asyncio.Future[bytes]":
        """Bytes ``[start, end)`` of object ``key`` (awaitable; queued at once,
        so ranges asked for before the caller's first await are coalesced).
        Served from kept bytes, or by a GET under way that covers the range,
        when there is one."""
        fut = asyncio.get_running_loop().create_future()
        self._ask(key, start, end, fut)
        return fut

    def get_many(self, ranges: list[tuple[str, int, int]], fut: asyncio.Future | None = None) -> asyncio.Future:
        """The bytes of each ``(key, start, end)`` of ``ranges``, in order,
        as one future (``fut``, or a new one), or the first error among
        them: as :meth:`get` for each, without a future per range (a
        compaction round of ~1,200 ledgers asks for ~1.2 million ranges at
        once, and a future each, gathered, was a fifth of the broker's loop)."""
        fut = asyncio.get_running_loop().create_future() if fut is None else fut
        many = _Many(fut, len(ranges))
        for i, (key, start, end) in enumerate(ranges):
            self._ask(key, start, end, _Slot(many, i))
        return fut

    def _ask(self, key: str, start: int, end: int, waiter) -> None:
        kept = self._kept.get(key)
        if kept is not None and kept[0] <= start and end <= kept[0] + len(kept[1]):
            self._kept.move_to_end(key)
            self.hits += 1
            waiter.set_result(kept[1][start - kept[0]:end - kept[0]])
            return
        for flight in self._flying.get(key, ()):
            if flight.begin <= start and end <= flight.end:
                flight.waiters.append((start, end, waiter))
                self.hits += 1
                return
        self._wanted.setdefault(key, []).append((start, end, waiter))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_later(self.window_s, self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        wanted, self._wanted = self._wanted, {}
        loop = asyncio.get_running_loop()
        for key, ranges in wanted.items():
            if self.pending is not None:
                ranges += [(start, end, None) for start, end in self.pending.ranges(key)]
            for span in self._spans(ranges):
                if all(fut is None for _, _, fut in span):
                    continue  # nobody waits for it: its compaction fetches it when it comes
                begin, end = span[0][0], max(r[1] for r in span)
                if begin < self.whole_bytes:  # a small object read whole (or its head): see the module docstring
                    begin, end = 0, max(end, self.whole_bytes)
                flight = _Flight(begin, end, span)
                self._flying.setdefault(key, []).append(flight)
                loop.create_task(self._fetch(key, flight))

    def _spans(self, ranges: list[tuple[int, int, asyncio.Future]]) -> list[list[tuple[int, int, asyncio.Future]]]:
        ranges.sort(key=lambda r: r[0])
        spans: list[list] = []
        reach = -1
        for r in ranges:
            if spans and r[0] - reach <= self.max_gap:
                spans[-1].append(r)
                reach = max(reach, r[1])
            else:
                spans.append([r])
                reach = r[1]
        return spans

    async def _fetch(self, key: str, flight: "_Flight") -> None:
        begin = flight.begin
        try:
            async with self._slots:
                self.gets += 1
                if chunk_object_ledger(key) is not None:
                    self.chunk_gets += 1
                buf = await self.objects.get(key, begin, flight.end)
        except BaseException as exc:  # every caller of the span hears it
            self._landed(key, flight)
            for _, _, fut in flight.waiters:
                if fut is not None and not fut.done():
                    fut.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        self._landed(key, flight)
        self.bytes += len(buf)
        view = memoryview(buf)
        for start, stop, fut in flight.waiters:
            if fut is not None and not fut.done():
                whole = (start, stop) == (begin, begin + len(buf))
                fut.set_result(buf if whole else bytes(view[start - begin:stop - begin]))
        self._keep(key, begin, buf)

    def _landed(self, key: str, flight: "_Flight") -> None:
        flights = self._flying[key]
        flights.remove(flight)
        if not flights:
            del self._flying[key]

    def _keep(self, key: str, offset: int, buf: bytes) -> None:
        old = self._kept.get(key)
        if old is not None and old[0] <= offset + len(buf) and offset <= old[0] + len(old[1]):
            low, high = min(old[0], offset), max(old[0] + len(old[1]), offset + len(buf))
            joined = bytearray(high - low)  # the two pieces of the object, as one
            joined[old[0] - low:old[0] - low + len(old[1])] = old[1]
            joined[offset - low:offset - low + len(buf)] = buf
            offset, buf = low, bytes(joined)
        if len(buf) > self.keep_bytes // 2:
            return
        old = self._kept.pop(key, None)
        if old is not None:
            self._kept_bytes -= len(old[1])
        self._kept[key] = (offset, buf)
        self._kept_bytes += len(buf)
        if self._kept_bytes <= self.keep_bytes:
            return
        # Over: least recently used first among the bytes no compaction waits
        # for; then, past keep_pending_bytes, the newest (see KEEP_PENDING_BYTES).
        # Only as far as needed: a compaction round streams gigabytes through
        # here, and a pass over every kept object per GET was seconds a round.
        over, going = self._kept_bytes - self.keep_bytes, []
        for other, (_, held) in self._kept.items():
            if over <= 0:
                break
            if not self._pending(other):
                going.append(other)
                over -= len(held)
        for other in going:
            _, dropped = self._kept.pop(other)
            self._kept_bytes -= len(dropped)
        if self._kept_bytes <= self.keep_bytes:
            return
        while self._kept_bytes > self.keep_pending_bytes:
            _, (_, dropped) = self._kept.popitem(last=True)
            self._kept_bytes -= len(dropped)

    def _pending(self, key: str) -> bool:
        # Asked of every kept object an eviction walks past: a membership
        # test, not the ranges (building each object's list of ranges here
        # was 65 % of the broker's loop in a compaction round at 10,000
        # topics, py-spy, 2026-11-29).
        return self.pending is not None and key in self.pending

    def forget(self) -> None:
        """Drop every kept byte (the backend closes)."""
        self._kept.clear()
        self._kept_bytes = 0


class _Flight:
    """A GET under way: bytes ``[begin, end)`` (asked for), and who waits for which part."""

    __slots__ = ("begin", "end", "waiters")

    def __init__(self, begin: int, end: int, waiters: list[tuple[int, int, asyncio.Future]]) -> None:
        self.begin, self.end, self.waiters = begin, end, waiters


class Lockstep:
    """Fetches of several members (compactions started together) released
    together: a member's :meth:`fetch` waits until every member still
    running has asked for its next ranges (or left), then all of them are
    queued in one turn, so each object they share is read once.

    Members ``join`` before their first fetch and ``leave`` (always: in a
    ``finally``) when done, failed or cancelled; leaving releases the
    others if they were waiting for it. Errors of a range go to the member
    that asked for it only."""

    def __init__(self, gets: RangeGets) -> None:
        self.gets = gets
        self.members = 0
        self._arrived: list[tuple[list[tuple[str, int, int]], asyncio.Future]] = []

    def join(self) -> None:
        self.members += 1

    def leave(self) -> None:
        self.members -= 1
        self._release_if_all()

    async def fetch(self, ranges: list[tuple[str, int, int]],
                    queued: Callable[[], None] | None = None) -> list[bytes]:
        """The bytes of each ``(key, start, end)``, in order; ``queued`` is
        called once they are all asked of the :class:`RangeGets` (served,
        under way or due at its next flush)."""
        fut = asyncio.get_running_loop().create_future()
        self._arrived.append((ranges, fut, queued))
        self._release_if_all()
        return await fut

    def _release_if_all(self) -> None:
        if not self._arrived or len(self._arrived) < self.members:
            return
        batch, self._arrived = self._arrived, []
        for ranges, fut, queued in batch:
            self.gets.get_many(ranges, fut)
            if queued is not None:
                queued()


class _Many:
    """The results of :meth:`RangeGets.get_many`, filled in by its slots."""

    __slots__ = ("fut", "results", "left")

    def __init__(self, fut: asyncio.Future, count: int) -> None:
        self.fut, self.results, self.left = fut, [b""] * count, count
        if not count and not fut.done():
            fut.set_result([])

    def got(self, i: int, data: bytes) -> None:
        self.results[i] = data
        self.left -= 1
        if not self.left and not self.fut.done():
            self.fut.set_result(self.results)


class _Slot:
    """One range of a :meth:`RangeGets.get_many`: a waiter as a future is
    (``done``, ``set_result``, ``set_exception``), filling its place."""

    __slots__ = ("many", "i")

    def __init__(self, many: _Many, i: int) -> None:
        self.many, self.i = many, i

    def done(self) -> bool:
        return self.many.fut.done()  # failed, or its caller cancelled

    def set_result(self, data: bytes) -> None:
        self.many.got(self.i, data)

    def set_exception(self, exc: BaseException) -> None:
        if not self.many.fut.done():
            self.many.fut.set_exception(exc)
