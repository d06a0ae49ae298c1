"""The ``compacted`` markers of indexed ledgers (and of ledgers chunked
from their writer's kept bytes, with their chunk records), written
together: one metadata transaction for the markers of many ledgers.

A ledger compacted into an index object (:mod:`.ledger_index`) costs etcd
one transaction: its marker, under a compare of its ledger record's
version and of the marker's absence. At 10,000 topics the rollover regime
seals ~32 ledgers a second, and those transactions were a sixth of what
etcd ran while the commits' own transactions starved. :meth:`MarkerBatches.write`
queues a marker and returns once its transaction is done; the queue goes
out as ONE transaction (every marker with its own two compares and its
put; ``MARKERS_PER_TRANSACTION`` ledgers at most, within etcd's 128
compares, and several such at once beyond that).

When: at once if no marker transaction began within ``SPACING_S``, else
that long after the last one began and never while one is in flight;
whatever queued meanwhile goes with it. So an idle broker's marker waits
for nothing, and a busy one's marker transactions are at most
``1 / SPACING_S`` a second whatever the seal rate (~6 markers each at 32
seals a second).

Failure modes. A transaction is all or nothing: if a ledger was fenced or
deleted meanwhile its compare fails, and with it the whole transaction.
``TransactionFailed.keys`` names the failing compares: those ledgers'
writes raise ``TransactionFailed`` (naming their own keys; the compaction
leaves them alone, as with a transaction of their own) and the rest are
retried at once, without them. ``MetadataError`` (etcd unreachable: the
outcome is unknown) is raised to every writer in that transaction: each
compaction gives up and is done again at the next seal or open, where a
marker that did land makes it a no-op. A write cancelled while queued
leaves the queue; one cancelled in flight may still land (as a
transaction of its own would). No durability of its own: the index object
is written before a marker is queued, so a crash before the transaction
leaves the ledger read from its commit records, as before.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from ...metadata.store import MAX_TRANSACTION_BYTES, Compare, MetadataError, MetadataStore, Put, TransactionFailed

#: Ledgers per marker transaction: each compares two keys (its record's
#: version, the marker absent), and etcd allows 128 compares by default.
MARKERS_PER_TRANSACTION = 64
#: Puts per marker transaction at most (etcd allows 128 operations by default),
#: and per marker: a chunked ledger's chunk records and its marker.
PUTS_PER_TRANSACTION = 128
PUTS_PER_MARKER = 8
#: Bytes of keys and values per marker transaction at most (a marker is a
#: few hundred bytes: this bounds the odd one with many spans).
BYTES_PER_TRANSACTION = MAX_TRANSACTION_BYTES // 2
#: A marker transaction begins at least this long after the previous one began.
SPACING_S = 0.2


@dataclass
class _Marker:
    compares: list[Compare]
    puts: list[Put]  # the marker last (a chunked ledger's chunk records before it)
    done: asyncio.Future = field(repr=False)

    def size(self) -> int:
        return sum(len(p.key) + len(p.value) for p in self.puts) + sum(len(c.key) for c in self.compares)


class MarkerBatches:
    """Markers queued for shared transactions on ``store`` (module docstring).
    ``transactions``: transactions sent, retries included; ``markers``: markers written."""

    def __init__(self, store: MetadataStore, *, spacing_s: float | None = None) -> None:
        self.store = store
        self.spacing_s = SPACING_S if spacing_s is None else spacing_s
        self._queue: list[_Marker] = []
        self._flusher: asyncio.Task | None = None
        self._last_began = float("-inf")
        self.transactions = 0
        self.markers = 0

    @property
    def queued(self) -> int:
        """Markers waiting for a transaction (not those in flight)."""
        return len(self._queue)

    async def write(self, compares: list[Compare], put: Put | list[Put]) -> None:
        """Put ``put`` (a marker, or a chunked ledger's chunk records and its
        marker last: at most ``PUTS_PER_MARKER``) if every one of ``compares`` holds, in a
        transaction shared with other markers. TransactionFailed (naming
        the keys of ``compares`` that failed) if one does not: nothing of
        it written; MetadataError if the store failed (it may have been)."""
        loop = asyncio.get_running_loop()
        puts = [put] if isinstance(put, Put) else list(put)
        if len(puts) > PUTS_PER_MARKER:
            raise ValueError(f"{len(puts)} puts for one marker: at most {PUTS_PER_MARKER}")
        marker = _Marker(list(compares), puts, loop.create_future())
        self._queue.append(marker)
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        try:
            await asyncio.shield(marker.done)
        except asyncio.CancelledError:
            if marker in self._queue:  # not sent: it goes with no transaction
                self._queue.remove(marker)
            raise

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                wait = self._last_began + self.spacing_s - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)  # gathering, only right after a transaction
                if not self._queue:
                    break
                batch, self._queue = self._queue, []
                self._last_began = loop.time()
                await asyncio.gather(*(self._commit(group) for group in self._groups(batch)))
        finally:
            self._flusher = None
            if self._queue:  # cancelled (the loop closes): nobody will send them
                for marker in self._queue:
                    _settle(marker, MetadataError("marker transactions stopped"))
                self._queue = []

    def stop(self) -> None:
        """Send nothing more (the backend closes): the writers waiting get MetadataError."""
        if self._flusher is not None:
            self._flusher.cancel()
        for marker in self._queue:
            _settle(marker, MetadataError("marker transactions stopped"))
        self._queue = []

    def _groups(self, batch: list[_Marker]) -> list[list[_Marker]]:
        """``batch`` in transactions within the bounds; a second marker of
        the same key (a key is written once per transaction) waits for the next."""
        groups: list[list[_Marker]] = []
        seen: set[str] = set()
        size = 0
        puts = 0
        for marker in batch:
            keys = {p.key for p in marker.puts}
            if keys & seen:
                self._queue.append(marker)
                continue
            seen |= keys
            if (not groups or len(groups[-1]) >= MARKERS_PER_TRANSACTION or size + marker.size() > BYTES_PER_TRANSACTION
                    or puts + len(marker.puts) > PUTS_PER_TRANSACTION):
                groups.append([])
                size = puts = 0
            groups[-1].append(marker)
            size += marker.size()
            puts += len(marker.puts)
        return groups

    async def _commit(self, group: list[_Marker]) -> None:
        while group:
            self.transactions += 1
            try:
                await self.store.transaction([c for m in group for c in m.compares], [p for m in group for p in m.puts],
                                             versions=False)
            except TransactionFailed as exc:
                failed = set(exc.keys)
                rest = []
                for marker in group:
                    mine = [c.key for c in marker.compares if c.key in failed]
                    if mine:
                        _settle(marker, TransactionFailed(mine))
                    else:
                        rest.append(marker)
                if len(rest) == len(group):  # it named none of them: say so to all, rather than loop
                    for marker in rest:
                        _settle(marker, exc)
                    return
                group = rest  # the others' compares held: again without the failed
                continue
            except MetadataError as exc:
                for marker in group:
                    _settle(marker, exc)
                return
            except BaseException as exc:
                for marker in group:
                    _settle(marker, exc if isinstance(exc, Exception) else MetadataError("cancelled"))
                raise
            self.markers += len(group)
            for marker in group:
                _settle(marker, None)
            return


def _settle(marker: _Marker, error: BaseException | None) -> None:
    if marker.done.done():
        return
    if error is None:
        marker.done.set_result(None)
    else:
        marker.done.set_exception(error)
        marker.done.exception()  # a writer cancelled meanwhile does not read it: no "never retrieved"
