"""The compiled decoder's pool of column blocks (``_columns_pool.c``):
freed blocks are handed out again, and never while an Arrow batch still
holds them."""
from __future__ import annotations

import gc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from magnetar.protocol import pb
from magnetar.protocol.compression import decompress
from pyspark_magnetar.entry_columns import buffers_to_batch
from pyspark_magnetar.fetch_columns import decode_fetch_python
from pyspark_magnetar.offsets import TopicPartition
from tests.helpers import as_bytes

from .test_entry_columns import compiled
from .test_fetch_columns import log_of, response

TP = TopicPartition("persistent://public/default/pool", 0)


def big_entries(seed: int, entries: int, members: int, size: int, compression: int = pb.NONE) -> bytes:
    """A response whose rows fill buffers past the pool's 64 KiB blocks."""
    specs = [{"batch": True, "event": 0, "key": None, "props": [], "compression": compression, "producer": "p",
              "members": [{"key": f"k{seed}-{i}-{j}", "event": 1_700_000_000_001 if j % 3 else 0,
                           "props": [("a", str(seed))] if j % 2 else [],
                           "value": bytes([(seed + i + j) % 251]) * size} for j in range(members)]}
             for i in range(entries)]
    stored, _ = log_of(specs, ["plain"] * entries)
    return response(stored)


def test_freed_column_blocks_are_handed_out_again():
    data = big_entries(1, 50, 200, 50)  # 10,000 rows: 500 KB of values, 80 KB of each time column
    pool = compiled().block_pool
    compiled().decode_fetch(data, 0, 0, 10_000, 0, decompress, 0)  # its buffers freed at once
    before = pool()
    assert before["kept_bytes"] >= 500_000
    got = compiled().decode_fetch(data, 0, 0, 10_000, 0, decompress, 0)
    after = pool()
    assert after["hits"] - before["hits"] >= 3  # values, offsets, times: kept blocks, no new pages
    assert as_bytes(got[0]) == as_bytes(decode_fetch_python(data, 0, 0, 10_000, 0, decompress, 0)[0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 6), st.integers(1, 120), st.integers(0, 3000),
                          st.sampled_from([pb.NONE, pb.LZ4]), st.booleans(), st.integers(0, 400)),
                min_size=2, max_size=8))
def test_a_batch_still_held_is_never_written_again(calls):
    """Decode call after call, keeping some record batches and dropping the
    rest (their blocks go back to the pool and out again): every batch kept
    still holds the rows the pure-Python twin decodes, at the end."""
    kept = []
    for seed, (entries, members, size, codec, keep, cap) in enumerate(calls):
        data = big_entries(seed, entries, members, size, codec)
        rows = entries * members
        got = compiled().decode_fetch(data, 0, 0, rows, 0, decompress, cap)
        want = decode_fetch_python(data, 0, 0, rows, 0, decompress, cap)
        assert as_bytes(got[0]) == as_bytes(want[0])
        batch = buffers_to_batch(TP, got[0])
        if keep:
            kept.append((batch, buffers_to_batch(TP, want[0])))
        del got, batch
        gc.collect()
    for batch, want in kept:
        assert batch.equals(want)
