"""A fetch response's stored entries straight to column buffers, in one call.

A FETCH_ENTRIES response (:mod:`magnetar.client.entry_fetch`) holds many
stored entries: ``[u32 count][u32 size]...`` then the entries back to back,
a stored entry being ``[0x0e02][u32 size][BrokerEntryMetadata]`` (its ``index`` is the
entry's last offset) then the producer's block ``[0x0e01][u32 crc32c]
[u32 meta size][MessageMetadata][payload]``. :func:`decode_fetch` walks
them and writes the rows of a range into the same buffers as
:func:`.entry_columns.decode_entries` (single messages and batches,
compressed or not, keys, properties, times), with no Python object per
entry or message when compiled (``_columns_fetch.c``); the pure-Python twin
:func:`decode_fetch_python` gives the same result (the unit tests hold them
to it).

It stops, for the caller to handle with the entry-by-entry rules of
:class:`.scan.RangeScanner`, at an entry that is a chunk, that leaves a gap
in the offsets, or that has no broker entry metadata (STOP_ENTRY); at a
new schema version (STOP_VERSION: the rows of one call share one); when
the range is complete (STOP_DONE). Markers give no row.

Failure modes: ValueError for a checksum mismatch or a malformed entry
(naming the offset), the protocol's ProtocolError for a payload that does
not decompress.
"""
from __future__ import annotations

import struct
from typing import Callable, NamedTuple

from magnetar.protocol import pb
from magnetar.protocol.checksum import crc32c
from magnetar.protocol.compression import decompress as _decompress

from .entry_columns import Buffers, EntryInput, _hot, decode_entries_python

STOP_END, STOP_ENTRY, STOP_DONE, STOP_VERSION = 0, 1, 2, 3

_U32 = struct.Struct(">I")


class Decoded(NamedTuple):
    """What one :func:`decode_fetch` call did (see the module)."""

    buffers: Buffers
    pos: int
    expected: int
    skipped: int
    stop: int
    schema_version: bytes | None
    first_offset: int  # of the first entry seen, -1 if none


class StoredEntry(NamedTuple):
    """One stored entry split: its last offset (None without broker entry
    metadata), its MessageMetadata bytes and its payload (as stored)."""

    index: int | None
    metadata_bytes: memoryview
    payload: memoryview


def split_stored(entry: memoryview) -> StoredEntry:
    """Split a stored entry; ValueError when malformed or the checksum does not match."""
    index = None
    pos = 0
    if len(entry) >= 6 and entry[0] == 0x0E and entry[1] == 0x02:
        (size,) = _U32.unpack_from(entry, 2)
        if 6 + size > len(entry):
            raise ValueError("broker entry metadata overruns the entry")
        bem = pb.BrokerEntryMetadata()
        try:
            bem.ParseFromString(bytes(entry[6:6 + size]))
        except Exception:
            raise ValueError("malformed broker entry metadata") from None
        index = bem.index if bem.HasField("index") else None
        pos = 6 + size
    if len(entry) - pos >= 2 and entry[pos] == 0x0E and entry[pos + 1] == 0x01:
        if len(entry) - pos < 10:
            raise ValueError("truncated checksum header")
        (crc,) = _U32.unpack_from(entry, pos + 2)
        if crc32c(entry[pos + 6:]) != crc:
            raise ValueError("checksum mismatch")
        pos += 6
    if len(entry) - pos < 4:
        raise ValueError("entry without metadata size")
    (meta_size,) = _U32.unpack_from(entry, pos)
    pos += 4
    if pos + meta_size > len(entry):
        raise ValueError("metadata overruns the entry")
    return StoredEntry(index, entry[pos:pos + meta_size], entry[pos + meta_size:])


def entries_of(data: bytes | memoryview, pos: int = 0):
    """``(number, entry bytes)`` of each entry of a response from entry number ``pos``."""
    view = memoryview(data)
    if len(view) < 4:
        raise ValueError("fetched entries truncated")
    (count,) = _U32.unpack_from(view, 0)
    if 4 + 4 * count > len(view):
        raise ValueError("fetched entries truncated")
    sizes = struct.unpack_from(f">{count}I", view, 4)
    at = 4 + 4 * count + sum(sizes[:pos])
    for i in range(pos, count):
        end = at + sizes[i]
        if end > len(view):
            raise ValueError("fetched entries truncated")
        yield i, view[at:end]
        at = end


def last_offset(data: bytes | memoryview, count: int) -> int:
    """The last offset of a response of ``count`` entries, from its last
    entry's broker entry metadata; -1 when it has none or does not parse.
    A hint only (how many rows a response still holds): nothing is decoded
    or checked by it."""
    if count <= 0 or len(data) < 4 + 4 * count:
        return -1
    (size,) = _U32.unpack_from(data, 4 * count)
    at = len(data) - size
    if size < 6 or at < 4 + 4 * count or data[at] != 0x0E or data[at + 1] != 0x02:
        return -1
    (meta_size,) = _U32.unpack_from(data, at + 2)
    if 6 + meta_size > size:
        return -1
    bem = pb.BrokerEntryMetadata()
    try:
        bem.ParseFromString(bytes(data[at + 6:at + 6 + meta_size]))
    except Exception:
        return -1
    return bem.index if bem.HasField("index") else -1


def entry_count(data: bytes | memoryview) -> int:
    """How many entries a response holds."""
    return _U32.unpack_from(data, 0)[0] if len(data) >= 4 else 0


def decode_fetch_python(data: bytes | memoryview, pos: int, lo: int, hi: int, expected: int,
                        decompress: Callable = _decompress, max_rows: int = 0) -> Decoded:
    """The pure-Python twin of ``_columns.decode_fetch`` (see the module)."""
    inputs: list[EntryInput] = []
    progress = [expected]
    try:
        result = _decode_fetch(data, pos, hi, expected, decompress, inputs, progress, max_rows)
    except ValueError as exc:
        raise ValueError(f"entry at offset {progress[0]}: {exc}") from None
    return result._replace(buffers=decode_entries_python(inputs, expected, hi))


def _decode_fetch(data, pos: int, hi: int, expected: int, decompress: Callable, inputs: list,
                  progress: list, max_rows: int = 0) -> Decoded:
    skipped = 0
    rows = 0
    first_seen = -1
    version: bytes | None = None
    stop = STOP_END
    for at, raw in entries_of(data, pos):
        end = at + 1
        if expected >= hi:
            stop = STOP_DONE
            pos = at
            break
        if max_rows > 0 and rows >= max_rows:  # enough rows for one batch: the caller goes on from pos
            stop, pos = STOP_END, at
            break
        progress[0] = expected
        stored = split_stored(raw)
        meta = pb.MessageMetadata()
        try:
            meta.ParseFromString(bytes(stored.metadata_bytes))
        except Exception:
            raise ValueError("malformed MessageMetadata") from None
        count = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        if stored.index is None or count < 0:
            stop, pos = STOP_ENTRY, at
            break
        first, last = stored.index - count + 1, stored.index
        if first_seen < 0:
            first_seen = first
        if meta.num_chunks_from_msg > 1 or first > expected:
            stop, pos = STOP_ENTRY, at
            break
        if last < expected or meta.HasField("marker_type"):
            if last >= expected:
                expected = min(last + 1, hi)
            else:
                skipped += count
            pos = end
            continue
        entry_version = bytes(meta.schema_version) if meta.HasField("schema_version") else None
        if inputs and entry_version != version:
            stop, pos = STOP_VERSION, at
            break
        version = entry_version
        payload = stored.payload
        if meta.compression != pb.NONE:
            payload = decompress(meta.compression, payload, meta.uncompressed_size)
        inputs.append(EntryInput(stored.metadata_bytes, payload, first))
        skipped += expected - first
        rows += min(last + 1, hi) - expected
        expected = min(last + 1, hi)
        pos = end
    else:
        pos = max(pos, entry_count(data))
        if expected >= hi:
            stop = STOP_DONE
    return Decoded((), pos, expected, skipped, stop, version, first_seen)


def decode_fetch(data: bytes | memoryview, pos: int, lo: int, hi: int, expected: int,
                 decompress: Callable = _decompress, max_rows: int = 0) -> Decoded:
    """The rows of ``[lo, hi)`` from offset ``expected`` in a fetch response
    from entry ``pos`` (see the module), compiled when built. With
    ``max_rows``, it stops (STOP_END, ``pos`` the next entry) at the first
    entry boundary at or past that many rows, so one call's buffers stay
    about one record batch however many rows the response holds (a 4 MiB
    response of compressed batches holds hundreds of thousands)."""
    if _hot is not None:
        return Decoded(*_hot.decode_fetch(data, pos, lo, hi, expected, decompress, max_rows))
    return decode_fetch_python(data, pos, lo, hi, expected, decompress, max_rows)
