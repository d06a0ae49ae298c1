"""Which partition of a partitioned topic each written row goes to.

A row with a key goes where its key hashes, as a Pulsar producer with the
same hashing scheme would send it: Java's ``String.hashCode``
(``JavaStringHash``, the Java client's default) or Murmur3 32-bit
(``Murmur3_32Hash``), masked to a non-negative int, modulo the partition
count. So a key stays in order on one partition, and the Java client (and
the connectors built on it) put the same key on the same partition. The
hash runs compiled (``pyspark_magnetar._columns``) or as its pure-Python
twin :func:`key_partitions_python` (the unit tests compare them).

Rows without a key go round robin in runs: the rows at positions
``[k * run, (k + 1) * run)`` go to partition ``(start + k) % n``, where
``run`` is the task's ``batchingMaxMessages`` (one batch entry per run, as
a batching Pulsar producer moves to the next partition per batch) and
``start`` comes from the task's producer name. Routing depends only on what
a task writes, never on the attempt: a retried task sends every row to the
partition it went to before, which the exactly-once sink relies on (each
partition's producer skips what that partition already stored).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from magnetar.client.partition_routing import HashingScheme, java_string_hash, murmur3_32_hash

from .entry_columns import _hot
from .row_batches import RowColumns

_HASH = {HashingScheme.JavaStringHash: java_string_hash, HashingScheme.Murmur3_32Hash: murmur3_32_hash}


def key_partitions(keys: pa.Array, partitions: int, scheme: HashingScheme) -> pa.Array:
    """int32 per row: the partition its key hashes to, -1 for a null key.
    ``keys`` is binary of valid UTF-8, without an Arrow slice offset."""
    if _hot is None:
        return key_partitions_python(keys, partitions, scheme)
    validity, offsets, data = keys.buffers()
    out = _hot.key_partitions(len(keys), validity if keys.null_count else None, offsets,
                              data if data is not None else b"", partitions, int(scheme))
    return pa.Array.from_buffers(pa.int32(), len(keys), [None, pa.py_buffer(out)])


def key_partitions_python(keys: pa.Array, partitions: int, scheme: HashingScheme) -> pa.Array:
    """The pure-Python twin of ``_columns.key_partitions``."""
    hash_of = _HASH[HashingScheme(scheme)]
    return pa.array([-1 if k is None else hash_of(k.decode("utf-8")) % partitions for k in keys.to_pylist()],
                    pa.int32())


def route(cols: RowColumns, partitions: int, scheme: HashingScheme, start: int, run: int) -> list[tuple[int, RowColumns]]:
    """``cols`` split by partition, in ascending partition order, each in row order."""
    if cols.keys is None:
        chosen = _round_robin(cols.positions, partitions, start, run)
    elif cols.keys.null_count == 0:
        chosen = key_partitions(cols.keys, partitions, scheme)
    else:
        hashed = key_partitions(cols.keys, partitions, scheme)
        chosen = pc.if_else(pc.equal(hashed, -1), _round_robin(cols.positions, partitions, start, run), hashed)
    order = pc.sort_indices(chosen)  # stable: row order holds within each partition
    counts = pc.value_counts(chosen.take(order))  # in order of appearance: ascending partitions
    if len(counts) == 1:
        return [(counts[0]["values"].as_py(), cols)]
    out, at = [], 0
    for entry in counts:
        n = entry["counts"].as_py()
        out.append((entry["values"].as_py(), cols.take(order.slice(at, n))))
        at += n
    return out


def _round_robin(positions: pa.Array, partitions: int, start: int, run: int) -> pa.Array:
    """``(start + position // run) % partitions`` as int32, vectorised."""
    runs = pc.add(pc.divide(positions, pa.scalar(run, pa.int64())), pa.scalar(start, pa.int64()))
    return pc.subtract(runs, pc.multiply(pc.divide(runs, partitions), partitions)).cast(pa.int32())


def start_of(producer_name: str, partitions: int) -> int:
    """The partition a task's keyless rows start at (fixed by its producer name,
    so its tasks spread over the partitions and a retry starts where it did)."""
    return java_string_hash(producer_name) % partitions
