"""Ledger ids handed out from blocks reserved in the metadata store.

Every ledger needs an id unique across brokers, and a managed ledger's
ledgers must have increasing ids: a position is ``(ledger id, entry id)``
and positions are compared in that order (cursors, acknowledgements,
seeks), also across owners of a topic. One counter increment per ledger
gave both, at two etcd round trips serialized per key (a Range, then a
compare-and-set Txn, each with an fsync): at 40 rollovers a second every
rollover's create queued behind the others'.

:class:`LedgerIds` reserves a block of ids with one increment
(``increment(LEDGER_ID_COUNTER, delta=n)`` returns the block's last id)
and hands them out locally: no I/O while ids are left. Blocks grow while
they are used up fast (from ``FIRST_BLOCK``, doubled up to ``MAX_BLOCK``
while a block lasts less than ``GROW_WITHIN_S``) and shrink when one lasts
far longer, so a quiet broker wastes few ids and a busy one makes one
increment per hundreds of ledgers. Callers that find the block used up
wait in a queue, served in order by one increment at a time sized to the
queue (at most ``MAX_BLOCK``): each caller is woken once, with its id.

**Order across owners**: a caller passes ``above``, the largest id its
managed ledger already names; ids at or below it are never handed to it.
A broker's block may lie below ids another broker reserved since (a topic
that moved here): the block is then dropped and a fresh one reserved. A
fresh block is above every id reserved before it anywhere (the counter
only grows), so one reservation serves every such topic.

Ids are never reused; they are not dense: the rest of a block is lost at
a close, a crash or a drop (nothing relies on density, or on the counter
being the largest id in use: ``orphans.mark`` relies only on ids reserved
after it being above it).

Failure modes: a failed increment raises ``StorageError`` in every caller
waiting then; the next call tries again. A caller cancelled leaves the
queue; the others' increment goes on.
"""
from __future__ import annotations

import asyncio
import collections
import time
from typing import Callable

from ..metadata.store import MetadataError, MetadataStore
from .errors import StorageError
from .ledger_meta import LEDGER_ID_COUNTER

#: The first block's size: a broker that creates one ledger wastes none.
FIRST_BLOCK = 1
#: The largest block: one increment per this many ledgers at the most.
MAX_BLOCK = 256
#: A block used up within this long is followed by one twice its size.
GROW_WITHIN_S = 1.0
#: A block that lasted this many times ``GROW_WITHIN_S`` or longer is followed by one half its size.
SHRINK_AFTER = 16


class LedgerIds:
    """Ledger ids from blocks of ``store``'s ``LEDGER_ID_COUNTER`` (see the
    module docstring). One per factory (per event loop)."""

    def __init__(self, store: MetadataStore, *, first_block: int = FIRST_BLOCK, max_block: int = MAX_BLOCK,
                 grow_within_s: float = GROW_WITHIN_S, clock: Callable[[], float] = time.monotonic) -> None:
        if not 1 <= first_block <= max_block:
            raise ValueError(f"need 1 <= first_block <= max_block, got {first_block}, {max_block}")
        self._store = store
        self._max_block = max_block
        self._grow_within_s = grow_within_s
        self._clock = clock
        #: The next id to hand out and the block's last id (next > last: none left).
        self._next = 1
        self._last = 0
        #: The size of the next block to reserve.
        self.block = first_block
        #: When the current block was reserved (None: none yet).
        self._reserved_at: float | None = None
        #: The task reserving blocks and handing them out while callers wait.
        self._reserving: asyncio.Task | None = None
        #: Callers waiting for an id, in order: (their ``above``, their future).
        self._waiting: collections.deque[tuple[int, asyncio.Future]] = collections.deque()
        #: Increments made (``/metrics``, tests).
        self.reservations = 0

    async def next(self, above: int = 0) -> int:
        """A new ledger id, greater than ``above`` and than every id this
        allocator handed out before. Raises ``StorageError`` if a block
        cannot be reserved."""
        if not self._waiting and self._next <= self._last:
            if self._next > above:
                ledger_id = self._next
                self._next += 1
                return ledger_id
            # Another broker reserved ids above this block since: drop it (a gap, never reused).
            self._next = self._last + 1
        # Queued in order; each waiter is woken once, with its id. (Waking
        # every waiter after each increment cost 2.5 s of CPU for 10,000
        # ledgers prepared together: the rollovers of a many-topic sending.)
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append((above, waiter))
        if self._reserving is None:
            self._reserving = asyncio.get_running_loop().create_task(self._serve())
        return await waiter

    async def _serve(self) -> None:
        """Hand out ids to the waiters in order, reserving blocks as needed."""
        waiting = self._waiting
        try:
            while waiting:
                while waiting and self._next <= self._last:
                    above, waiter = waiting[0]
                    if waiter.done():  # its caller was cancelled
                        waiting.popleft()
                    elif self._next <= above:
                        self._next = self._last + 1  # a block below the topic's ledgers: dropped
                    else:
                        waiting.popleft()
                        waiter.set_result(self._next)
                        self._next += 1
                if waiting:
                    await self._reserve(max(a for a, _ in waiting), len(waiting))
        except BaseException as exc:
            failed, self._waiting = list(waiting), collections.deque()
            for _, waiter in failed:
                if not waiter.done():
                    waiter.set_exception(exc if isinstance(exc, StorageError) else
                                         StorageError(f"allocating a ledger id failed: {exc!r}"))
            if not isinstance(exc, Exception):
                raise
        finally:
            self._reserving = None

    async def _reserve(self, above: int, wanted: int) -> None:
        """Reserve the next block: at least ``wanted`` ids (the waiters),
        at most ``max_block``, above ``above``."""
        now = self._clock()
        if self._reserved_at is not None:
            lasted = now - self._reserved_at
            if lasted < self._grow_within_s:
                self.block = min(self.block * 2, self._max_block)
            elif lasted >= self._grow_within_s * SHRINK_AFTER:
                self.block = max(self.block // 2, 1)
        size = min(max(self.block, wanted), self._max_block)
        try:
            last = await self._store.increment(LEDGER_ID_COUNTER, size)
            self.reservations += 1
            first = last - size + 1
            if last <= above:
                # The counter is below ids in use (never so unless it was reset): reserve past them.
                delta = above - last + size
                last = await self._store.increment(LEDGER_ID_COUNTER, delta)
                self.reservations += 1
                first = max(last - delta + 1, above + 1)  # ours: last - delta + 1 .. last
        except MetadataError as exc:
            raise StorageError(f"allocating a ledger id failed: {exc}") from exc
        if first <= self._last:  # a store answering out of order would hand an id twice
            raise StorageError(f"ledger id counter went back: block {first}..{last} after {self._last}")
        self._next, self._last = first, last
        self._reserved_at = self._clock()

    @property
    def left(self) -> int:
        """Ids left in the current block."""
        return max(0, self._last - self._next + 1)
