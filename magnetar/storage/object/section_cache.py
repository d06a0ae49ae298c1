"""The object backend's read cache: sections fetched by ranged GETs.

Catch-up reads fetch a whole section (one ranged GET, at most a commit's or
a compacted chunk's bytes) and keep its entries here, least recently used
first out, within ``max_bytes`` and within the broker's shared
:class:`~..cache.CacheBudget` (the tail caches' budget: a broker's caches
hold that much together). Concurrent reads of one section share one GET.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Awaitable, Callable

from ..cache import CacheBudget

Key = tuple[str, int]  # (object key, offset)


class SectionCache:
    def __init__(self, max_bytes: int, budget: CacheBudget | None = None) -> None:
        self.max_bytes = max_bytes
        self.budget = budget
        self.bytes = 0
        self._items: OrderedDict[Key, tuple[list[bytes], int]] = OrderedDict()
        self._fetching: dict[Key, asyncio.Future] = {}
        self.hits = 0
        self.misses = 0

    def holds(self, key: Key) -> bool:
        """Whether ``key`` is cached or being fetched (no I/O, no LRU update)."""
        return key in self._items or key in self._fetching

    async def get(self, key: Key, fetch: Callable[[], Awaitable[list[bytes]]]) -> list[bytes]:
        """The section's entries, from memory or ``fetch()`` (its errors propagate)."""
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]
        running = self._fetching.get(key)
        if running is not None:
            return await asyncio.shield(running)
        self.misses += 1
        fut = asyncio.get_running_loop().create_future()
        self._fetching[key] = fut
        try:
            entries = await fetch()
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        finally:
            self._fetching.pop(key, None)
        fut.set_result(entries)
        self._put(key, entries)
        return entries

    def _put(self, key: Key, entries: list[bytes]) -> None:
        if not self.max_bytes:
            return
        nbytes = sum(map(len, entries))
        if nbytes > self.max_bytes:
            return
        self._items[key] = (entries, nbytes)
        self.bytes += nbytes
        if self.budget is not None:
            self.budget._grew(self, nbytes)
        self._evict(self.max_bytes)

    def _evict(self, limit: int) -> None:
        """Drop least recently used sections until at most ``limit`` bytes
        remain (also called by the shared budget)."""
        while self.bytes > limit and self._items:
            _, (_, nbytes) = self._items.popitem(last=False)
            self.bytes -= nbytes
            if self.budget is not None:
                self.budget._shrank(self, nbytes)

    def clear(self) -> None:
        self._evict(0)
