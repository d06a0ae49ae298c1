"""Cursors: a subscription's position in a managed ledger.

A cursor remembers what was acknowledged: everything at or before
``mark_delete_position``, plus ``individually_deleted`` runs after it (the
holes left by out-of-order acks). It also has a ``read_position``, the next
entry to hand out, which is not persisted: after a restart reading starts
again right after the mark-delete position (at-least-once delivery).

Durable cursors persist their state in the metadata store (compare-and-set
on the cursor's own key, in one transaction with a compare of the managed
ledger's record, so that an owner that lost the managed ledger cannot
overwrite what the new owner loaded) before ``mark_delete``, ``delete``, ``reset`` and
``set_properties`` return. Persists coalesce: while one write is in flight,
later calls wait and are all covered by the next write of the latest state.
If a write fails the call raises ``StorageError``; the in-memory state keeps
the change and the next successful write persists it. A compare-and-set
conflict (someone else wrote or deleted the cursor) raises
``CursorFencedError``, the cursor refuses further changes, and its managed
ledger tells whoever serves from it to let go (``_cursor_fenced``: the
broker unloads the topic at once; its next load reads the cursor as
stored). That conflict is also what a write of ours looks like whose
answer the store lost after it landed: the version held is then stale.

Non-durable cursors (readers) keep their state in memory only and do not
hold data back from trimming.

At most ``MAX_PERSISTED_RUNS`` runs of individual acks are persisted (the
first ones); acks beyond them are redelivered after a restart.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Iterable, Protocol

from ..metadata.store import BadVersion, MetadataError, KeyNotFound
from .errors import CursorFencedError, ManagedLedgerClosedError, ManagedLedgerFencedError, StorageError
from .position import Position

#: A cursor record's format (its ``format`` field; a record without one is format 1).
CURSOR_FORMAT = 1
from .entry import Entry
from .ranges import PositionRangeSet


class CursorLedger(Protocol):
    """What a cursor uses of its managed ledger (``managed_ledger.ManagedLedger``,
    which imports this module): positions, reads, the metadata store it
    persists to, and the hook that lets trimming follow the cursor."""

    name: str
    _config: Any  # StorageConfig: cursor_persist_interval_ms
    _store: Any  # MetadataStore

    @property
    def last_confirmed(self) -> Position | None: ...

    def next_position(self, pos: Position) -> Position: ...

    def _next_append_position(self) -> Position: ...

    def _entries_after(self, pos: Position) -> int: ...

    def _is_confirmed_entry(self, pos: Position) -> bool: ...

    def _cursor_moved(self, mark_delete: Position) -> None: ...

    def _cursor_fenced(self, error: CursorFencedError) -> None:
        """A cursor's record changed elsewhere: this instance can persist it no more."""

    async def _put_cursor(self, key: str, value: bytes, version: int) -> int:
        """Compare-and-set the cursor's record while the managed ledger is
        still this instance's (else ``ManagedLedgerFencedError``)."""

    async def read_entries(self, start: Position, max_entries: int,
                           max_bytes: int | None = None) -> list[Entry]: ...

log = logging.getLogger(__name__)

MAX_PERSISTED_RUNS = 10_000


class ManagedCursor:
    def __init__(
        self,
        ml: CursorLedger,
        name: str,
        mark_delete: Position,
        *,
        durable: bool = True,
        key: str | None = None,
        version: int = -1,
        properties: dict[str, int] | None = None,
    ) -> None:
        self.name = name
        self.durable = durable
        self.mark_delete_position = mark_delete
        self.individually_deleted = PositionRangeSet()
        #: Batch-index acknowledgement: for an entry some of whose messages
        #: are acknowledged, the bit mask of those still *not* acknowledged
        #: (bit i = message i; Pulsar's ack-set convention).
        self.batch_acks: dict[Position, int] = {}
        self.properties: dict[str, int] = dict(properties or {})
        self._ml = ml
        self._key = key
        self._version = version
        self.read_position = ml.next_position(mark_delete)
        self._read_epoch = 0  # bumped by seek/rewind/reset: a read in flight must not move read_position
        self._gen = 0  # bumped by every change to persisted state
        self._persisted_gen = 0
        self._persisted_mark_delete = mark_delete  # what trimming may rely on
        self._persist_task: asyncio.Task | None = None
        self._last_persist = float("-inf")
        self._closed: StorageError | None = None

    def __repr__(self) -> str:
        return f"<ManagedCursor {self.name!r} md={self.mark_delete_position} read={self.read_position}>"

    # --------------------------------------------------------------- queries

    def is_deleted(self, pos: Position) -> bool:
        """True if ``pos`` is acknowledged (cumulatively or individually)."""
        return pos <= self.mark_delete_position or pos in self.individually_deleted

    @property
    def closed(self) -> bool:
        """Closed with its ledger (or fenced): every call raises."""
        return self._closed is not None

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Acked runs after the mark-delete position, as inclusive (first, last) pairs."""
        return self.individually_deleted.ranges()

    def backlog(self) -> int:
        """Confirmed entries after the mark-delete position not individually acked."""
        return max(0, self._ml._entries_after(self.mark_delete_position) - len(self.individually_deleted))

    def has_more_entries(self) -> bool:
        last = self._ml.last_confirmed
        return last is not None and self.read_position <= last

    # ------------------------------------------------------------------ acks

    async def mark_delete(self, pos: Position) -> None:
        """Acknowledge everything up to and including ``pos``.

        Positions at or before the current mark-delete are ignored; positions
        past the last confirmed entry are clamped to it. Returns once the new
        state is persisted (durable cursors).
        """
        self._check_open()
        last = self._ml.last_confirmed
        if last is None:
            pos = self.mark_delete_position  # nothing stored: nothing to acknowledge
        elif pos > last:
            pos = last
        if pos > self.mark_delete_position:
            self.mark_delete_position = pos
            self.individually_deleted.remove_through(pos)
            self._advance()
            self._gen += 1
        await self._persist()

    async def delete(self, positions: Iterable[Position]) -> None:
        """Acknowledge individual entries.

        Positions that are already acked, or are not confirmed entries, are
        ignored. The mark-delete position then advances across any hole-free
        run of acked entries right after it (across ledger boundaries).
        Returns once the new state is persisted (durable cursors).
        """
        self._check_open()
        md = self.mark_delete_position
        is_entry = self._ml._is_confirmed_entry
        add = self.individually_deleted.add
        changed = False
        for pos in positions:
            if pos > md and is_entry(pos) and add(pos):
                changed = True
        if changed:
            self._advance()
            self._gen += 1
        await self._persist()

    async def delete_batch_indexes(self, pos: Position, remaining: int) -> bool:
        """Acknowledge some messages of the batch entry ``pos``: ``remaining``
        is the mask of its messages the consumer has *not* acknowledged (what
        earlier calls left unacknowledged stays so unless cleared here too).
        When none is left the entry is deleted whole. Returns True if the
        entry is now fully acknowledged. Persisted before returning."""
        self._check_open()
        if self.is_deleted(pos) or not self._ml._is_confirmed_entry(pos):
            return True
        left = remaining if pos not in self.batch_acks else self.batch_acks[pos] & remaining
        if left == 0:
            self.batch_acks.pop(pos, None)
            await self.delete([pos])
            return True
        if self.batch_acks.get(pos) != left:
            self.batch_acks[pos] = left
            self._gen += 1
        await self._persist()
        return False

    async def mark_delete_within_batch(self, pos: Position, remaining: int) -> None:
        """A cumulative acknowledgement that stops inside the batch entry
        ``pos``: everything before the entry, and the messages of ``pos``
        that ``remaining`` (the mask of those *not* acknowledged) leaves out.
        Both land in one persisted state, so a stop between them cannot keep
        one without the other."""
        self._check_open()
        if not self.is_deleted(pos) and self._ml._is_confirmed_entry(pos):
            left = remaining if pos not in self.batch_acks else self.batch_acks[pos] & remaining
            if left == 0:
                await self.mark_delete(pos)
                return
            if self.batch_acks.get(pos) != left:
                self.batch_acks[pos] = left
                self._gen += 1
        # (ledger, entry - 1) is "everything before this entry", also for entry 0.
        await self.mark_delete(Position(pos.ledger_id, pos.entry_id - 1))

    def _forget_batch_acks(self) -> None:
        """Entries deleted whole need no batch state."""
        if self.batch_acks:
            for pos in [p for p in self.batch_acks if self.is_deleted(p)]:
                del self.batch_acks[pos]

    def _advance(self) -> None:
        """Move mark-delete over acked runs that start right after it."""
        ml = self._ml
        ranges = self.individually_deleted
        md = self.mark_delete_position
        moved = False
        while ranges:
            end = ranges.run_end(ml.next_position(md))
            if end is None:
                break
            md = end
            moved = True
        if moved:
            self.mark_delete_position = md
            ranges.remove_through(md)
        first_unacked = ml.next_position(self.mark_delete_position)
        if self.read_position < first_unacked:
            self.read_position = first_unacked
        self._forget_batch_acks()

    # --------------------------------------------------------------- reading

    async def read_entries(self, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` confirmed, unacknowledged entries from
        ``read_position`` on; advances ``read_position`` past what was examined.

        Returns ``[]`` when nothing is available, or when a seek/rewind/reset
        happened while reading (the caller reads again from the new position).
        One read at a time per cursor: concurrent reads return the same entries.
        """
        self._check_open()
        ml = self._ml
        epoch = self._read_epoch
        pos = self._skip_acked(self.read_position)
        out: list[Entry] = []
        while len(out) < max_entries:
            entries = await ml.read_entries(pos, max_entries - len(out))
            if epoch != self._read_epoch:
                return []
            if not entries:
                break
            for entry in entries:
                if not self.is_deleted(entry.position):
                    out.append(entry)
            pos = self._skip_acked(ml.next_position(entries[-1].position))
        if pos > self.read_position:
            self.read_position = pos
        return out

    def _skip_acked(self, pos: Position) -> Position:
        ml = self._ml
        if pos <= self.mark_delete_position:
            pos = ml.next_position(self.mark_delete_position)
        while True:
            end = self.individually_deleted.run_end(pos)
            if end is None:
                return pos
            pos = ml.next_position(end)

    def rewind(self) -> None:
        """Read again from the first unacknowledged entry."""
        self.read_position = self._ml.next_position(self.mark_delete_position)
        self._read_epoch += 1

    def seek(self, pos: Position) -> None:
        """Set the read position only (acks are untouched)."""
        self.read_position = pos
        self._read_epoch += 1

    async def reset(self, pos: Position) -> None:
        """Make ``pos`` the next entry to read and forget acks from it on:
        mark-delete becomes the position just before ``pos`` and individual
        acks are cleared. ``pos`` past the end is clamped to where the next
        append goes. Persisted before returning (durable cursors)."""
        self._check_open()
        ml = self._ml
        end = ml._next_append_position()
        if pos > end:
            pos = end
        if pos.entry_id > 0:
            md = Position(pos.ledger_id, pos.entry_id - 1)
        else:
            md = Position(pos.ledger_id, -1)
        self.mark_delete_position = md
        self.individually_deleted.clear()
        self.batch_acks.clear()
        self.read_position = pos
        self._read_epoch += 1
        self._gen += 1
        await self._persist()

    async def set_properties(self, updates: dict[str, int | None]) -> None:
        """Merge ``updates`` into ``properties`` (None deletes a key); persisted."""
        self._check_open()
        for key, value in updates.items():
            if value is None:
                self.properties.pop(key, None)
            else:
                self.properties[key] = int(value)
        self._gen += 1
        await self._persist()

    # ----------------------------------------------------------- persisting

    def _check_open(self) -> None:
        if self._closed is not None:
            raise self._closed

    def snapshot(self) -> dict:
        """The persisted form of the cursor's state."""
        runs = []
        for i, run in enumerate(self.individually_deleted.runs()):
            if i == MAX_PERSISTED_RUNS:
                break
            runs.append(list(run))
        md = self.mark_delete_position
        doc = {
            "format": CURSOR_FORMAT,
            "name": self.name,
            "mark_delete": [md.ledger_id, md.entry_id],
            "individually_deleted": runs,
            "properties": self.properties,
        }
        if self.batch_acks:
            doc["batch_acks"] = [[p.ledger_id, p.entry_id, mask]
                                 for p, mask in list(self.batch_acks.items())[:MAX_PERSISTED_RUNS]]
        return doc

    @classmethod
    def from_snapshot(cls, ml: CursorLedger, doc: dict, *, key: str, version: int) -> "ManagedCursor":
        md = Position(*doc["mark_delete"])
        cursor = cls(ml, doc["name"], md, key=key, version=version, properties=doc.get("properties"))
        for lid, first, last in doc.get("individually_deleted", ()):
            cursor.individually_deleted.add_run(lid, first, last)
        cursor.individually_deleted.remove_through(md)
        for lid, eid, mask in doc.get("batch_acks", ()):
            cursor.batch_acks[Position(lid, eid)] = int(mask)
        cursor._advance()
        cursor.read_position = ml.next_position(cursor.mark_delete_position)
        cursor._persisted_mark_delete = cursor.mark_delete_position
        return cursor

    async def _persist(self) -> None:
        if not self.durable:
            return
        target = self._gen
        while self._persisted_gen < target:
            self._check_open()
            task = self._persist_task
            if task is None:
                task = self._persist_task = asyncio.get_running_loop().create_task(self._write())
                # Its waiters may all be cancelled (a topic unloading) before it
                # fails; shield then drops it and asyncio would log its error as
                # unhandled. The waiters still present get the error raised.
                task.add_done_callback(_mark_retrieved)
            await asyncio.shield(task)

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            interval = self._ml._config.cursor_persist_interval_ms / 1000
            delay = self._last_persist + interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # rate limit: everything acked meanwhile rides along
            self._check_open()
            gen = self._gen
            md = self.mark_delete_position
            value = json.dumps(self.snapshot(), separators=(",", ":")).encode()
            try:
                self._version = await self._ml._put_cursor(self._key, value, self._version)
            except (BadVersion, KeyNotFound, ManagedLedgerFencedError) as exc:
                self._closed = CursorFencedError(f"cursor {self.name!r} of {self._ml.name!r} changed elsewhere: {exc}")
                self._ml._cursor_fenced(self._closed)
                raise self._closed from exc
            except MetadataError as exc:
                raise StorageError(f"persisting cursor {self.name!r} failed: {exc}") from exc
            self._last_persist = loop.time()
            self._persisted_gen = gen
            moved = md > self._persisted_mark_delete
            self._persisted_mark_delete = md
            if moved:
                self._ml._cursor_moved(md)
        finally:
            self._persist_task = None

    async def _close(self, reason: StorageError | None = None) -> None:
        """Stop accepting changes; wait for a persist in flight."""
        if self._closed is None:
            self._closed = reason or ManagedLedgerClosedError(f"cursor {self.name!r} is closed")
        task = self._persist_task
        if task is not None:
            try:
                await asyncio.shield(task)
            except Exception:
                pass


def _mark_retrieved(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
