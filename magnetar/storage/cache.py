"""The tail cache: the most recently appended entries of one managed ledger.

Consumers that keep up read what producers just wrote; serving those reads
from memory avoids a pread per dispatch. The cache keeps, per ledger, one
contiguous run of entries ending at the newest one put, and evicts the oldest
entries first, down to ``max_bytes`` of entry data, once it holds an eighth
more than that: a steady producer then pays for eviction once per eighth of
the cache, in slices, rather than an entry's worth of Python per entry put.

It may hold entries that are not yet durable; the managed ledger never reads
past its last confirmed entry, and calls :meth:`truncate` when writes fail.

Only while someone reads: a managed ledger fills its cache while someone
follows it (a subscription, a replicator, a fetch waiting at the tail:
its entry listeners) or read its cache in the last
:data:`READ_KEEPS_FILLING_S` (a reader polling without waiting). A topic
only written to (read later, by a backfill) caches nothing: at 10,000 such
topics the puts and the shared budget's bookkeeping were 6 % of the
broker's loop, for entries nobody read before they were evicted. Pulsar's
managed ledger likewise caches entries only while it has active cursors.

The caches of one storage factory (one broker) also share a
:class:`CacheBudget`: past it, the caches written to least recently give
up their entries first. Without it, each topic's cache is bounded but their sum is
not: a broker with a few hundred busy topics would hold gigabytes of old
tails of topics nobody reads.
"""
from __future__ import annotations

import time
from collections import OrderedDict

#: A read of the cache this recently (seconds) keeps it filling though
#: nobody listens for new entries (see the module docstring).
READ_KEEPS_FILLING_S = 30.0
_NEVER = float("-inf")


class _Run(list):
    """A ledger's cached entries, ``first`` on: the list of their bytes
    itself, one object per ledger (a record beside its list was two, made at
    each ledger's first append: 20,000 for the first collections after
    10,000 topics start being written to walk)."""

    __slots__ = ("first",)

    def __init__(self, first: int) -> None:
        super().__init__()
        self.first = first  # entry id of self[0]

    def end(self) -> int:
        """Entry id just past the last cached entry."""
        return self.first + len(self)


class CacheBudget:
    """Bytes shared by many :class:`TailCache` s (one factory's, on one loop).

    Contract: after any put, the caches hold at most ``max_bytes`` plus an
    eighth in total. Once over that, entries go down to ``max_bytes``, the
    oldest of the caches put to least recently first (idle topics' tails
    before the busy ones'); the cache just put to goes last. ``max_bytes``
    0: no shared limit (each cache keeps its own).
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._caches: OrderedDict[int, TailCache] = OrderedDict()  # least recently put to first

    def _grew(self, cache: "TailCache", nbytes: int) -> None:
        self.bytes += nbytes
        key = id(cache)
        if key in self._caches:
            self._caches.move_to_end(key)
        else:
            self._caches[key] = cache
        limit = self.max_bytes
        if limit and self.bytes > limit + (limit >> 3):
            for other in list(self._caches.values()):
                if self.bytes <= limit:
                    break
                other._evict(max(0, other.bytes - (self.bytes - limit)))

    def _shrank(self, cache: "TailCache", nbytes: int) -> None:
        self.bytes -= nbytes
        if cache.bytes == 0:
            self._caches.pop(id(cache), None)


class TailCache:
    def __init__(self, max_bytes: int, budget: CacheBudget | None = None) -> None:
        self.max_bytes = max_bytes
        self.budget = budget
        self.bytes = 0
        self._runs: dict[int, _Run] = {}  # ledger id -> run; insertion order = age
        self._last_id = -1
        self._last: _Run | None = None
        #: ``time.monotonic()`` of the last :meth:`get` (-inf: never read).
        self.read_at = _NEVER

    def read_recently(self) -> bool:
        """Whether :meth:`get` was called in the last :data:`READ_KEEPS_FILLING_S`."""
        read_at = self.read_at
        # Never read (most of many written topics): no clock read. Asked at
        # every hand-over, it was 1-2 % of the loop at 10,000 written topics.
        return read_at != _NEVER and time.monotonic() - read_at < READ_KEEPS_FILLING_S

    def put_many(self, ledger_id: int, first: int, datas: list[bytes]) -> None:
        """Cache ``datas`` as entries ``first, first+1...`` of the ledger. A
        gap after what is cached for the ledger restarts its run."""
        if not self.max_bytes or not datas:
            return
        run = self._last
        if run is None or ledger_id != self._last_id or first != run.end():
            run = self._start(ledger_id, first)
        run.extend(datas)
        added = len(datas[0]) if len(datas) == 1 else sum(map(len, datas))
        self.bytes += added
        if self.bytes > self.max_bytes + (self.max_bytes >> 3):
            self._evict(self.max_bytes)
        if self.budget is not None:
            self.budget._grew(self, added)

    def _start(self, ledger_id: int, entry_id: int) -> _Run:
        self.drop(ledger_id)
        run = _Run(entry_id)
        self._runs[ledger_id] = run
        self._last_id = ledger_id
        self._last = run
        return run

    def get(self, ledger_id: int, first: int, last: int) -> list[bytes]:
        """Cached entries from ``first`` on, up to ``last`` (inclusive), if
        ``first`` is cached; else ``[]``. Keeps the cache filling for a while
        (:meth:`read_recently`)."""
        self.read_at = time.monotonic()
        run = self._runs.get(ledger_id)
        if run is None or not run.first <= first < run.end():
            return []
        start = first - run.first
        return run[start : start + last - first + 1]

    def first_cached(self, ledger_id: int) -> int | None:
        """Lowest cached entry id of the ledger, or None."""
        run = self._runs.get(ledger_id)
        if run is None or run.end() == run.first:
            return None
        return run.first

    def truncate(self, ledger_id: int, from_entry: int) -> None:
        """Forget entries ``>= from_entry`` of the ledger (they failed)."""
        run = self._runs.get(ledger_id)
        if run is None:
            return
        keep = max(0, from_entry - run.first)
        if keep >= run.end() - run.first:
            return
        cut = run[keep:]
        del run[keep:]
        self._freed(sum(map(len, cut)))

    def drop(self, ledger_id: int) -> None:
        run = self._runs.pop(ledger_id, None)
        if run is None:
            return
        if run is self._last:
            self._last = None
            self._last_id = -1
        self._freed(sum(map(len, run)))

    def clear(self) -> None:
        self._runs.clear()
        self._last = None
        self._last_id = -1
        self._freed(self.bytes)

    def _freed(self, nbytes: int) -> None:
        self.bytes -= nbytes
        if self.budget is not None:
            self.budget._shrank(self, nbytes)

    def _evict(self, limit: int) -> None:
        """Drop the oldest entries, oldest run first, until at most ``limit`` bytes remain."""
        while self.bytes > limit and self._runs:
            ledger_id, run = next(iter(self._runs.items()))
            items = run
            head, end = 0, len(items)
            need = self.bytes - limit
            freed = 0
            while head < end and freed < need:
                # Half of what the next entry's size says would cover the
                # rest, summed in C: a few slices per eviction, and little
                # evicted beyond the need when sizes vary.
                step = min(end - head, max(1, (need - freed) // (2 * len(items[head]) or 1)))
                freed += sum(map(len, items[head:head + step]))
                head += step
            run.first += head
            del items[:head]
            self._freed(freed)
            if not items:
                if run is self._last:
                    return  # keep the (empty) newest run so appends stay on the fast path
                del self._runs[ledger_id]
