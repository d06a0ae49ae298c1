"""A fetch response -> Arrow columns: the compiled decode_fetch, its
pure-Python twin, and the entry-by-entry decoder (itself held to the
message path in test_entry_columns) give the same buffers, stops and
offsets for the same stored entries."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.broker.entries.entry_format import build_entry_python
from magnetar.protocol import pb
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import checksummed_block
from pyspark_magnetar.entry_columns import EntryInput, decode_entries_python, entry_payload
from pyspark_magnetar.fetch_columns import (STOP_DONE, STOP_END, STOP_ENTRY, STOP_VERSION, decode_fetch_python,
                                            entries_of)
from tests.helpers import as_bytes

from .test_entry_columns import build, compiled, count_of, entry

#: What may sit in the log beside plain entries.
kind = st.sampled_from(["plain", "plain", "plain", "marker", "chunk", "v2", "gap"])


def response(stored: list[bytes]) -> bytes:
    """A FETCH_ENTRIES response's payload: [count][sizes...][entries]."""
    return struct.pack(f">I{len(stored)}I", len(stored), *map(len, stored)) + b"".join(stored)


def log_of(specs: list[dict], kinds: list[str]) -> tuple[list[bytes], list[tuple[int, int, str, pb.MessageMetadata, bytes]]]:
    """Stored entries for ``specs`` (offsets dense from 0 except at a
    "gap"), and (first, count, kind, metadata, payload) of each."""
    stored, info, first = [], [], 0
    for spec, k in zip(specs, kinds):
        if k == "gap":
            first += 3
        meta, payload = build(spec, first)
        if k == "marker":
            meta.marker_type = pb.REPLICATED_SUBSCRIPTION_SNAPSHOT
        elif k == "chunk":
            meta.ClearField("num_messages_in_batch")
            meta.uuid, meta.chunk_id, meta.num_chunks_from_msg, meta.total_chunk_msg_size = "u", 0, 2, 10
        elif k == "v2":
            meta.schema_version = struct.pack(">q", 2)
        n = 1 if k == "chunk" else count_of(spec)
        block = checksummed_block(meta.SerializeToString(), payload)
        stored.append(build_entry_python(block, 1, first, n))
        info.append((first, n, k, meta, payload))
        first += n
    return stored, info


def walk(decode, data: bytes, lo: int, hi: int, max_rows: int = 0) -> list:
    """Every call's result over a response, stepping over the entries left to the caller
    (with ``max_rows``, calls that stop at that many rows go on from where they stopped)."""
    out, pos, expected = [], 0, lo
    for _ in range(100):
        got = decode(data, pos, lo, hi, expected, decompress, max_rows)
        buffers = as_bytes(got[0])
        out.append((buffers, *got[1:]))
        pos, expected, stop = got[1], got[2], got[4]
        if stop == STOP_END and max_rows and pos < len(entries_of_count(data)):
            continue
        if stop in (STOP_END, STOP_DONE):
            return out
        if stop == STOP_ENTRY:
            pos += 1
    raise AssertionError("no end")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(entry, kind), min_size=0, max_size=6), st.integers(0, 8), st.integers(0, 40))
def test_compiled_matches_the_twin(pairs, lo, width):
    stored, _ = log_of([p[0] for p in pairs], [p[1] for p in pairs])
    data = response(stored)
    assert walk(compiled().decode_fetch, data, lo, lo + width) == walk(decode_fetch_python, data, lo, lo + width)


def entries_of_count(data: bytes) -> range:
    return range(struct.unpack_from(">I", data, 0)[0])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(entry, kind), min_size=0, max_size=6), st.integers(0, 8), st.integers(0, 40),
       st.integers(1, 5))
def test_a_row_cap_cuts_calls_at_entries_and_loses_nothing(pairs, lo, width, cap):
    """With max_rows each call stops at the first entry boundary at or past
    that many rows (compiled and twin alike), and the calls' rows put
    together are the uncapped calls' rows, in order."""
    stored, _ = log_of([p[0] for p in pairs], [p[1] for p in pairs])
    data = response(stored)
    capped = walk(compiled().decode_fetch, data, lo, lo + width, cap)
    assert capped == walk(decode_fetch_python, data, lo, lo + width, cap)
    whole = walk(compiled().decode_fetch, data, lo, lo + width)

    def offsets(calls):
        return [o for c in calls for o in struct.unpack(f"<{c[0][0]}q", c[0][6])]

    assert offsets(capped) == offsets(whole)
    # a call stops early only once it has its rows: every call but the last of a run has at least cap rows
    for call, after in zip(capped, capped[1:]):
        if call[4] == STOP_END:
            assert call[0][0] >= cap


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(entry, min_size=1, max_size=6), st.integers(0, 8), st.integers(0, 40))
def test_one_call_gives_the_rows_of_the_entries(specs, lo, width):
    """Plain entries in sequence: one call, the rows decode_entries gives,
    and the range's next offset after them."""
    stored, info = log_of(specs, ["plain"] * len(specs))
    hi = lo + width
    inputs = [EntryInput(m.SerializeToString(), entry_payload(m, p), first) for first, _, _, m, p in info]
    total = info[-1][0] + info[-1][1]
    got = compiled().decode_fetch(response(stored), 0, lo, hi, lo, _decompress)
    assert as_bytes(got[0]) == decode_entries_python(inputs, lo, hi)
    assert got[2] == min(hi, max(lo, total))
    assert got[4] == (STOP_DONE if hi <= max(lo, total) else STOP_END)


def _decompress(codec, payload, size):
    return decompress(codec, payload, size)


def test_stops_are_where_the_caller_takes_over():
    plain = {"batch": True, "event": 0, "key": None, "props": [], "compression": pb.NONE, "producer": "p",
             "members": [{"key": "k", "event": 0, "props": [], "value": b"v"}] * 2}
    stored, _ = log_of([plain] * 6, ["plain", "marker", "v2", "chunk", "gap", "plain"])
    data = response(stored)
    steps = [(got[1], got[2], got[4], got[0][0]) for got in (
        compiled().decode_fetch(data, 0, 0, 100, 0, _decompress),
        compiled().decode_fetch(data, 2, 0, 100, 4, _decompress),
        compiled().decode_fetch(data, 4, 0, 100, 7, _decompress))]
    # entries 0 (2 rows) and the marker (no row); the v2 entry starts a new run
    assert steps[0] == (2, 4, STOP_VERSION, 2)
    # v2 (2 rows), then the chunk is the caller's
    assert steps[1] == (3, 6, STOP_ENTRY, 2)
    # after the chunk (offset 6), the gap (offsets 7..9 missing) is the caller's
    assert steps[2] == (4, 7, STOP_ENTRY, 0)


@pytest.mark.parametrize("decode", [decode_fetch_python, "compiled"])
@pytest.mark.parametrize("damage", ["checksum", "truncated", "sizes"])
def test_damaged_responses_are_one_value_error(decode, damage):
    if decode == "compiled":
        decode = compiled().decode_fetch
    plain = {"batch": False, "event": 0, "key": None, "props": [], "compression": pb.NONE, "producer": "p",
             "members": [{"key": None, "event": 0, "props": [], "value": b"value"}]}
    stored, _ = log_of([plain] * 3, ["plain"] * 3)
    data = bytearray(response(stored))
    if damage == "checksum":
        data[-1] ^= 0xFF
    elif damage == "truncated":
        del data[-3:]
    else:
        data[0:4] = struct.pack(">I", 1000)
    with pytest.raises(ValueError, match="entry at offset"):
        decode(bytes(data), 0, 0, 10, 0, _decompress)


def test_entries_of_walks_the_sizes():
    data = response([b"abc", b"", b"defg"])
    assert [(i, bytes(v)) for i, v in entries_of(data)] == [(0, b"abc"), (1, b""), (2, b"defg")]
    assert [i for i, _ in entries_of(data, 2)] == [2]


@pytest.mark.parametrize("decode", [decode_fetch_python, "compiled"])
def test_a_row_cap_stops_at_the_next_entry_boundary(decode):
    if decode == "compiled":
        decode = compiled().decode_fetch
    plain = {"batch": True, "event": 0, "key": None, "props": [], "compression": pb.NONE, "producer": "p",
             "members": [{"key": "k", "event": 0, "props": [], "value": b"v"}] * 2}
    stored, _ = log_of([plain] * 6, ["plain"] * 6)
    data = response(stored)
    # 3 rows wanted: two whole entries (4 rows), then the caller goes on from entry 2
    got = decode(data, 0, 0, 100, 0, _decompress, 3)
    assert (got[0][0], got[1], got[2], got[4]) == (4, 2, 4, STOP_END)
    got = decode(data, 2, 0, 100, 4, _decompress, 3)
    assert (got[0][0], got[1], got[2], got[4]) == (4, 4, 8, STOP_END)
    # no cap: the rest of the response in one call
    got = decode(data, 4, 0, 100, 8, _decompress)
    assert (got[0][0], got[1], got[2], got[4]) == (4, 6, 12, STOP_END)
