"""Reading the messages with offsets in ``[start, end)`` of one partition by
bulk fetches, as Arrow record batches (what a Spark task runs).

The scan asks the broker for the partition's stored entries from the entry
holding ``start`` (FETCH_ENTRIES: :class:`magnetar.client.entry_fetch.EntryFetcher`,
about 4 MiB of entries per response, the next response on its way while
this one is decoded) and turns each response into column buffers in one
call (:func:`.fetch_columns.decode_fetch`, compiled, run in a worker thread
so the session's loop goes on receiving). Nothing is done per entry in
Python on the common path: one message per entry, batches, compressed
batches all decode in that call.

The entries that call leaves to the scan follow the entry-by-entry rules of
:class:`.scan.RangeScanner`, which this scan composes: chunks (assembled,
read back for when their first chunks lie before the range), gaps in the
offsets (data loss: an error, or a warning with ``failOnDataLoss=false``),
entries without offsets (not a Magnetar broker). Silence for
``pollTimeoutMs`` before ``end`` is data loss too.

Failure modes: as :class:`.scan.RangeScanner`; a response that does not
decode (checksum, malformed entry, a payload that does not decompress) is a
MagnetarSparkError naming the partition and offset.
"""
from __future__ import annotations

import asyncio
import time
from typing import NamedTuple, Union

import pyarrow as pa

from magnetar.client import AsyncClient
from magnetar.client.entry_fetch import DEFAULT_MAX_BYTES, EntryFetcher
from magnetar.client.entry_reader import RawEntry
from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.compression import decompress as _decompress

from .entry_columns import Buffers, EntryInput, buffers_to_batch
from .errors import MagnetarSparkError
from .fetch_columns import STOP_DONE, STOP_ENTRY, decode_fetch, entries_of, entry_count, last_offset, split_stored
from .offsets import TopicPartition
from .scan import _READ_BACK, RangeScanner
from .topic_schemas import decode_version
from .value_columns import ValueReader


class Rows(NamedTuple):
    """Rows one decode call produced, all of one schema version."""

    buffers: Buffers
    version: int | None


#: What next_entries hands to to_batches: decoded rows, or an entry the
#: scan's rules took (RangeScanner's (entry, lowest offset, rows, version)).
Piece = Union[Rows, tuple]


class FetchScanner:
    """The messages of ``tp`` with ``start <= offset < end`` in offset
    order. Open with :meth:`open`, take pieces with :meth:`next_entries`
    (on the session's loop) and turn them into batches with
    :meth:`to_batches` (in the caller's thread) until ``next_entries``
    returns ``[]``, then :meth:`close`."""

    def __init__(self, client: AsyncClient, tp: TopicPartition, start: int, end: int, *, poll_timeout_ms: int,
                 fail_on_data_loss: bool, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        # The entry-by-entry rules (chunks, read-back, losses) and the range's progress.
        self._rules = RangeScanner(None, tp, start, end, poll_timeout_ms=poll_timeout_ms,  # type: ignore[arg-type]
                                   fail_on_data_loss=fail_on_data_loss, client=client)
        self.tp = tp
        self.start = start
        self._poll_ms = poll_timeout_ms
        # max_bytes: each response's budget (smaller only in tests, to make many fetches).
        self._fetcher = EntryFetcher(client, tp.name, start, max_bytes=max_bytes, max_wait_ms=min(poll_timeout_ms, 1000))
        self._data: memoryview = memoryview(b"")
        self._pos = 0  # the next entry of _data to take
        self._count = 0  # entries in _data
        self._last_offset = -1  # the last offset in _data (-1: not known), a batch-sizing hint

    @classmethod
    async def open(cls, client: AsyncClient, tp: TopicPartition, start: int, end: int, *,
                   poll_timeout_ms: int, fail_on_data_loss: bool, max_bytes: int = DEFAULT_MAX_BYTES) -> "FetchScanner":
        return cls(client, tp, start, end, poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=fail_on_data_loss,
                   max_bytes=max_bytes)

    @property
    def expected(self) -> int:
        return self._rules.expected

    @property
    def skipped(self) -> int:
        return self._rules.skipped

    @property
    def fetches(self) -> int:
        return self._fetcher.fetches

    @property
    def retries(self) -> int:
        return self._fetcher.retries

    async def next_entries(self, max_rows: int) -> list[Piece]:
        """The next pieces of the range, about ``max_rows`` rows; ``[]``
        once the range is complete. Decoded rows never span two responses
        (each decode call is one record batch): a call ends with its
        response, and takes the rest of a response when that is at most
        half as much again as ``max_rows``, so a response's tail is not a
        small batch of its own (Spark pays per batch, on both sides)."""
        rules = self._rules
        out: list[Piece] = []
        rows = 0
        loop = asyncio.get_running_loop()
        while rules.expected < rules.end and rows < max_rows:
            if self._pos >= self._count:
                if rows or not await self._refill():
                    break
                continue
            want = max_rows - rows
            rest = min(self._last_offset + 1, rules.end) - rules.expected
            limit = rest if 0 < rest <= want + want // 2 else want
            try:
                # At most about `limit` rows: a response of compressed batches decodes
                # into record batches of about max_rows each, not one of its whole length.
                got = await loop.run_in_executor(None, decode_fetch, self._data, self._pos, self.start, rules.end,
                                                 rules.expected, _decompress, limit)
            except (ValueError, ProtocolError) as exc:
                raise MagnetarSparkError(f"{self.tp}: {exc}") from None
            if rules._scan_first is None and got.first_offset >= 0:
                rules._scan_first = got.first_offset
            rules.skipped += got.skipped
            rules.expected = got.expected
            self._pos = got.pos
            if got.buffers[0]:
                version = decode_version(got.schema_version) if got.schema_version is not None else None
                out.append(Rows(got.buffers, version))
                rows += got.buffers[0]
            if got.stop == STOP_ENTRY:
                rows += await self._take_one(out)
            elif got.stop == STOP_DONE:
                break
        return out

    async def _refill(self) -> bool:
        """The next response with entries; False (after reporting the loss)
        when none came for pollTimeoutMs."""
        rules = self._rules
        deadline = time.monotonic() + self._poll_ms / 1000
        while True:
            fetched = await self._fetcher.next()
            if fetched.count:
                self._data, self._pos, self._count = fetched.data, 0, entry_count(fetched.data)
                self._last_offset = last_offset(self._data, self._count)
                return True
            if time.monotonic() >= deadline:
                rules._lost(rules.expected, rules.end,
                            f"no message arrived within pollTimeoutMs={self._poll_ms} ms")
                rules.expected = rules.end
                return False

    async def _take_one(self, out: list[Piece]) -> int:
        """The entry at the current position, by the entry-by-entry rules; its rows."""
        rules = self._rules
        _, raw = next(entries_of(self._data, self._pos))
        self._pos += 1
        try:
            stored = split_stored(raw)
            meta = pb.MessageMetadata()
            meta.ParseFromString(bytes(stored.metadata_bytes))
        except Exception as exc:
            raise MagnetarSparkError(f"{self.tp}: cannot read the entry after offset {rules.expected - 1}: "
                                     f"{exc}") from None
        count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        first = stored.index - count + 1 if stored.index is not None else None
        entry = RawEntry(0, 0, first, count, meta, stored.metadata_bytes, stored.payload)
        if first is not None and meta.HasField("marker_type"):  # no row; a gap before it is still a loss
            if first > rules.expected and rules.expected < rules.end:
                rules._lost(rules.expected, min(first, rules.end), f"the next message the broker had was offset {first}")
            rules.expected = max(rules.expected, min(first + count, rules.end))
            return 0
        taken: list = []
        n = rules._take(entry, taken)
        if n == _READ_BACK:
            await rules._read_back(entry)
            n = rules._take(entry, taken)
        out.extend(taken)
        return max(n, 0)

    def to_batches(self, pieces: list[Piece], values: ValueReader | None = None) -> list[pa.RecordBatch]:
        """The rows of ``pieces`` (from :meth:`next_entries`) as record
        batches, in order; with ``values``, the value column decoded by the
        topic's schema."""
        batches: list[pa.RecordBatch] = []
        taken: list = []
        for piece in pieces:
            if isinstance(piece, Rows):
                if taken:
                    batches += self._rules.to_batches(taken, values)
                    taken = []
                batch = buffers_to_batch(self.tp, piece.buffers)
                if values is not None:
                    batch = values.apply(self.tp, batch, pa.repeat(pa.scalar(piece.version, pa.int64()),
                                                                    batch.num_rows))
                batches.append(batch)
            else:
                taken.append(piece)
        if taken:
            batches += self._rules.to_batches(taken, values)
        return batches

    @staticmethod
    def versions_of(pieces: list[Piece]) -> set[int | None]:
        return {piece.version if isinstance(piece, Rows) else piece[3] for piece in pieces}

    async def close(self) -> None:
        await self._fetcher.close()


__all__ = ["FetchScanner", "Rows", "EntryInput"]
