"""Reading the messages with offsets in ``[start, end)`` of one partition,
as Arrow record batches, entry by entry through a subscription.

Tasks read with bulk fetches (:mod:`.fetch_scan`), which compose this
class for the entries that need its rules one at a time (chunks and their
read-back, gaps, entries without offsets); this path reads back for a
chunked message's first chunks.

A scan starts an entry reader (:mod:`magnetar.client.entry_reader`) at an
entry known to lie at or before ``start`` (:mod:`.positioning`: the entry
holding ``start``, found by the broker's seek by offset, else the earliest
retained message) and decodes whole entries into columns
(:mod:`.entry_columns`), dropping the members below ``start``; offsets come
from the broker entry metadata of every entry. Cost: ``end - start`` plus
the batch members of the starting entry below ``start`` (plus one probe;
the whole retained prefix only when positioning fell back to earliest).

Read-ahead: the reader's receiver queue (READ_AHEAD_MESSAGES) lets the
broker keep sending while the task decodes and Spark consumes the previous
batch, so a task does not wait a round trip per chunk.

Chunked messages (:mod:`.chunks`): a message a producer split into chunk
entries becomes one row at the offset of its LAST chunk; its other chunks'
offsets give no row. A range emits the messages whose last chunk lies in
it; when their first chunks lie before the range, the scan reads back for
them (a window of READ_BACK_FACTOR times the chunk count before the range,
doubling up to MAX_READ_BACK offsets). A first chunk removed by retention is
data loss (failOnDataLoss); one not found within MAX_READ_BACK, or a message
whose producer died mid-message, gives no row (as the official consumer).

Completeness is checked, not assumed: offsets are dense, so the scan expects
``start, start+1, ...`` entry by entry and treats a jump, or silence for
``pollTimeoutMs`` before ``end``, as data loss (an error, or a warning with
``failOnDataLoss=false``).
"""
from __future__ import annotations

import logging

import pyarrow as pa

from magnetar.client import AsyncClient
from magnetar.client.entry_reader import AsyncEntryReader, RawEntry, create_entry_reader
from magnetar.client.errors import InvalidMessage, Timeout
from magnetar.protocol import ProtocolError

from .chunks import ChunkAssembler, chunk_key, is_chunk
from .entry_columns import EntryInput, entries_to_batch, entry_payload
from .errors import DataLossError, MagnetarSparkError
from .offsets import TopicPartition
from .positioning import start_position
from .topic_schemas import decode_version
from .value_columns import ValueReader

log = logging.getLogger(__name__)

#: Messages the broker may send ahead of what the task has taken (the reader's
#: receiver queue): about 10 MB of 100-byte messages.
READ_AHEAD_MESSAGES = 100_000
#: The first read-back window for a chunked message's first chunks, in
#: offsets per chunk (other producers' entries may interleave), and its cap.
READ_BACK_FACTOR = 4
MAX_READ_BACK = 1_000_000


class RangeScanner:
    """The messages of ``tp`` with ``start <= offset < end`` in offset order,
    as record batches. Open with :meth:`open`, then take entries with
    :meth:`next_entries` (on the session's loop) and decode them with
    :meth:`to_batches` (in the caller's thread) until ``next_entries`` returns
    ``[]``, then :meth:`close`.

    Failure modes: DataLossError (offsets missing, ``fail_on_data_loss``);
    MagnetarSparkError if the broker sends no offsets (not a Magnetar broker,
    or broker entry metadata disabled) or an entry that cannot be decoded;
    the client's errors (TopicNotFound, ConnectError after the client gave up
    reconnecting, ...).
    """

    def __init__(self, reader: AsyncEntryReader, tp: TopicPartition, start: int, end: int, *,
                 poll_timeout_ms: int, fail_on_data_loss: bool, client: AsyncClient | None = None) -> None:
        self._reader = reader
        self._client = client  # for reading back the first chunks of a chunked message
        self._chunks = ChunkAssembler()
        self._scan_first: int | None = None  # the first offset the reader delivered
        self._read_back_done: set = set()  # messages whose first chunks were looked for once
        self.tp = tp
        self.end = end
        self.expected = start  # the next offset the range needs
        self._poll_ms = poll_timeout_ms
        self._strict = fail_on_data_loss
        self.skipped = 0  # messages read below start: the starting entry's members before it

    @classmethod
    async def open(cls, client: AsyncClient, tp: TopicPartition, start: int, end: int, *,
                   poll_timeout_ms: int, fail_on_data_loss: bool) -> "RangeScanner":
        first = await start_position(client, tp, start)
        reader = await create_entry_reader(client, tp.name, first, inclusive=True,
                                           receiver_queue_size=READ_AHEAD_MESSAGES)
        return cls(reader, tp, start, end, poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=fail_on_data_loss,
                   client=client)

    async def next_entries(self, max_rows: int) -> list[tuple[EntryInput, int, int, int | None]]:
        """The next entries of the range holding about ``max_rows`` of its
        messages, each with the lowest offset to keep, the number of rows it
        gives and its schema version (None if none); ``[]`` once complete."""
        out: list[tuple[EntryInput, int, int, int | None]] = []
        rows = 0
        while self.expected < self.end and rows < max_rows:
            try:
                entries = await self._reader.read_entries(max_rows - rows, self._poll_ms)
            except Timeout:
                self._lost(self.expected, self.end, f"no message arrived within pollTimeoutMs={self._poll_ms} ms")
                self.expected = self.end
                break
            except InvalidMessage as exc:
                raise MagnetarSparkError(f"{self.tp}: cannot read the entry after offset {self.expected - 1}: "
                                         f"{exc}") from None
            for entry in entries:
                taken = self._take(entry, out)
                if taken == _READ_BACK:
                    await self._read_back(entry)
                    taken = self._take(entry, out)
                if taken < 0:
                    break
                rows += taken
        return out

    def _take(self, entry: RawEntry, out: list) -> int:
        """Add ``entry`` to ``out`` if it holds offsets the range needs; how
        many rows it adds, -1 once past the end."""
        if self.expected >= self.end:
            return -1  # the range is complete; read-ahead brought entries past it
        first = entry.first_offset
        if first is None:
            raise MagnetarSparkError(
                f"{self.tp}: the broker sent a message without an offset (broker entry metadata); "
                "the Spark connector needs a Magnetar broker")
        if self._scan_first is None:
            self._scan_first = first
        last = first + entry.count - 1
        if last < self.expected:
            if is_chunk(entry.metadata):  # an earlier chunk of a message that may end in the range
                self._chunks.add(entry.metadata, entry.payload, first)
            self.skipped += entry.count
            return 0
        if first > self.expected:
            self._lost(self.expected, min(first, self.end), f"the next message the broker had was offset {first}")
            self.expected = min(first, self.end)
        if first >= self.end:
            self.expected = self.end
            return -1
        self.skipped += self.expected - first
        meta = entry.metadata
        if is_chunk(meta):
            return self._take_chunk(entry, out)
        try:
            payload = entry_payload(entry.metadata, entry.payload)
        except ProtocolError as exc:
            raise MagnetarSparkError(f"{self.tp}: entry at offset {first}: {exc}") from None
        before, self.expected = self.expected, min(last + 1, self.end)
        version = decode_version(meta.schema_version) if meta.HasField("schema_version") else None
        out.append((EntryInput(entry.metadata_bytes, payload, first), before, self.expected - before, version))
        return self.expected - before

    def _take_chunk(self, entry: RawEntry, out: list) -> int:
        """One chunk entry (one offset): a row only when it completes its
        message; _READ_BACK when its first chunks lie before the scan."""
        meta = entry.metadata
        if (meta.chunk_id == meta.num_chunks_from_msg - 1 and self._client is not None
                and self._chunks.missing_before(meta) and chunk_key(meta) not in self._read_back_done):
            return _READ_BACK
        try:
            whole = self._chunks.add(meta, entry.payload, entry.first_offset)
        except ProtocolError as exc:
            raise MagnetarSparkError(f"{self.tp}: chunked message ending at offset {entry.first_offset}: "
                                     f"{exc}") from None
        self.expected = entry.first_offset + 1
        if whole is None:
            return 0
        version = decode_version(meta.schema_version) if meta.HasField("schema_version") else None
        out.append((whole, whole.first_offset, 1, version))
        return 1

    async def _read_back(self, last: RawEntry) -> None:
        """Find the leading chunks of ``last``'s message before the scan's
        first offset and hand them to the assembler; if they are not found,
        the message gives no row (data loss if retention removed them)."""
        meta = last.metadata
        key = chunk_key(meta)
        self._read_back_done.add(key)
        want = self._chunks.missing_before(meta)
        stop = self._scan_first if self._scan_first is not None else last.first_offset
        window = meta.num_chunks_from_msg * READ_BACK_FACTOR
        while True:
            lo = max(0, stop - window)
            parts, earliest = await self._chunks_between(key, want, lo, stop)
            if parts is not None:
                self._chunks.prepend(key, parts)
                return
            if earliest is not None and earliest > lo:
                self._lost(lo, earliest, f"the first chunks of the chunked message ending at offset "
                                         f"{last.first_offset} were removed")
                return
            if lo == 0 or window >= MAX_READ_BACK:
                log.warning("%s: the first chunks of the chunked message ending at offset %d were not found "
                            "within %d offsets before it; it is incomplete and gives no row",
                            self.tp, last.first_offset, window)
                return
            window *= 2

    async def _chunks_between(self, key, want: int, lo: int, stop: int) -> tuple[list | None, int | None]:
        """Chunks ``0..want-1`` of message ``key`` among offsets ``[lo, stop)``
        (None unless all found in order) and the first offset delivered."""
        first = await start_position(self._client, self.tp, lo)
        reader = await create_entry_reader(self._client, self.tp.name, first, inclusive=True,
                                           receiver_queue_size=1000)
        parts: list = []
        earliest = None
        try:
            while True:
                try:
                    entries = await reader.read_entries(1000, self._poll_ms)
                except Timeout:
                    return None, earliest
                for entry in entries:
                    if entry.first_offset is None or entry.first_offset >= stop:
                        return (parts if len(parts) == want else None), earliest
                    if earliest is None:
                        earliest = entry.first_offset
                    m = entry.metadata
                    if entry.first_offset < lo or not is_chunk(m) or chunk_key(m) != key:
                        continue
                    if m.chunk_id == 0:
                        parts = []
                    if m.chunk_id == len(parts) and len(parts) < want:
                        parts.append(bytes(entry.payload))
        finally:
            try:
                await reader.close()
            except Exception:  # non-durable reader: nothing to lose
                log.debug("closing a read-back reader of %s failed", self.tp, exc_info=True)

    def to_batches(self, entries: list[tuple[EntryInput, int, int, int | None]],
                   values: ValueReader | None = None) -> list[pa.RecordBatch]:
        """The range's rows held by ``entries`` (from :meth:`next_entries`):
        one batch, or one per run when an entry overlaps the one before it
        (each run is decoded from its own lowest offset to keep). With
        ``values``, the value column is decoded by the topic's schema."""
        runs: list[tuple[int, list[EntryInput], list[tuple[int, int | None]]]] = []
        for entry, lo, rows, version in entries:
            if runs and lo == entry.first_offset:
                runs[-1][1].append(entry)
                runs[-1][2].append((rows, version))
            else:
                runs.append((lo, [entry], [(rows, version)]))
        try:
            batches = [(entries_to_batch(self.tp, run, lo, self.end, sum(n for n, _ in kept)), kept)
                       for lo, run, kept in runs]
        except ValueError as exc:
            raise MagnetarSparkError(f"{self.tp}: {exc}") from None
        if values is None:
            return [batch for batch, _ in batches]
        return [values.apply(self.tp, batch, _versions(kept, batch.num_rows)) for batch, kept in batches]

    @staticmethod
    def versions_of(entries: list[tuple[EntryInput, int, int, int | None]]) -> set[int | None]:
        return {version for _, _, _, version in entries}

    def _lost(self, first: int, stop: int, why: str) -> None:
        text = (f"{self.tp}: offsets {first}..{stop - 1} are missing ({why}); they were removed by retention, "
                "the topic was deleted and recreated, or the broker is unreachable")
        if self._strict:
            raise DataLossError(text + ". Set failOnDataLoss=false to skip missing offsets.")
        log.warning("%s; skipping them (failOnDataLoss=false)", text)

    async def close(self) -> None:
        try:
            await self._reader.close()
        except Exception:  # the reader is non-durable: nothing is lost if close fails
            log.debug("closing the reader of %s failed", self.tp, exc_info=True)


_READ_BACK = -2  # _take: fetch this chunk's first chunks, then take it again


def _versions(kept: list[tuple[int, int | None]], rows: int) -> pa.Array:
    """The schema version of each of ``rows`` rows, from (rows, version) per entry."""
    if len({v for _, v in kept}) == 1:
        return pa.repeat(pa.scalar(kept[0][1], pa.int64()), rows)
    out = pa.array([v for n, v in kept for _ in range(n)], pa.int64())
    if len(out) != rows:  # the decoder and the broker's counts disagree: fail rather than misattribute
        raise MagnetarSparkError(f"{rows} rows decoded but the entries' counts add up to {len(out)}")
    return out
