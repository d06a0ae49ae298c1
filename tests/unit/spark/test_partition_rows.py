"""Routing a write's rows to the partitions of a partitioned topic: the
compiled key hash and its pure-Python twin agree (and match Java's values),
every row lands on exactly one partition in its order, and the routing
depends only on the rows, so a retry routes them as before."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.client.partition_routing import HashingScheme, java_string_hash, murmur3_32_hash
from pyspark_magnetar.partition_rows import key_partitions, key_partitions_python, route, start_of
from pyspark_magnetar.row_batches import prepare

SCHEMES = [HashingScheme.JavaStringHash, HashingScheme.Murmur3_32Hash]
key_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def compiled():
    """Imported directly: a missing build fails the test instead of skipping it."""
    from pyspark_magnetar import _columns
    return _columns


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.none() | key_text, max_size=40), partitions=st.integers(1, 70),
       scheme=st.sampled_from(SCHEMES))
def test_the_compiled_hash_is_its_twins(keys, partitions, scheme):
    array = pa.array([None if k is None else k.encode() for k in keys], pa.binary())
    validity, offsets, data = array.buffers()
    out = compiled().key_partitions(len(array), validity if array.null_count else None, offsets,
                                    data if data is not None else b"", partitions, int(scheme))
    got = pa.Array.from_buffers(pa.int32(), len(array), [None, pa.py_buffer(out)]).to_pylist()
    assert got == key_partitions_python(array, partitions, scheme).to_pylist()
    assert got == key_partitions(array, partitions, scheme).to_pylist()
    hash_of = java_string_hash if scheme == HashingScheme.JavaStringHash else murmur3_32_hash
    assert got == [-1 if k is None else hash_of(k) % partitions for k in keys]


def test_java_values():
    """Java's "hello".hashCode() is 99162322; a character outside the BMP hashes as its two UTF-16 units."""
    keys = pa.array([b"hello", "\U0001F600".encode(), b"polygenelubricants"], pa.binary())
    assert key_partitions(keys, 2**31 - 1, HashingScheme.JavaStringHash).to_pylist() == \
        [99162322, 55357 * 31 + 56832, 0]


def test_the_compiled_hash_refuses_bad_arguments():
    array = pa.array([b"a", b"b"], pa.binary())
    _, offsets, data = array.buffers()
    with pytest.raises(ValueError, match="partition count or scheme"):
        compiled().key_partitions(2, None, offsets, data, 0, 2)
    with pytest.raises(ValueError, match="partition count or scheme"):
        compiled().key_partitions(2, None, offsets, data, 3, 1)  # BoostHash
    with pytest.raises(ValueError, match="shorter than the rows"):
        compiled().key_partitions(5, None, offsets, data, 3, 2)


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.none() | st.sampled_from(["a", "b", "c", "d", "ü"]), min_size=1, max_size=300),
       first=st.integers(0, 10_000), partitions=st.integers(1, 6), run=st.integers(1, 50),
       start=st.integers(0, 5), scheme=st.sampled_from(SCHEMES))
def test_every_row_goes_to_one_partition_in_order(keys, first, partitions, run, start, scheme):
    batch = pa.RecordBatch.from_pydict({"value": pa.array([str(i).encode() for i in range(len(keys))], pa.binary()),
                                        "key": pa.array(keys, pa.string())})
    (cols,) = prepare(batch, "t", first).values()
    routed = route(cols, partitions, scheme, start % partitions, run)
    assert [p for p, _ in routed] == sorted({p for p, _ in routed})
    seen = []
    for p, part in routed:
        positions = part.positions.to_pylist()
        assert positions == sorted(positions), "row order holds within a partition"
        for pos, key in zip(positions, part.keys.to_pylist() if part.keys is not None else [None] * len(part)):
            if key is None:
                assert p == (start % partitions + pos // run) % partitions
            else:
                assert key.decode() == keys[pos - first]
                hash_of = java_string_hash if scheme == HashingScheme.JavaStringHash else murmur3_32_hash
                assert p == hash_of(key.decode()) % partitions
        seen += positions
    assert sorted(seen) == list(range(first, first + len(keys)))


def test_a_task_routes_its_rows_the_same_way_every_time():
    batch = pa.RecordBatch.from_pydict({"value": pa.array([b"v"] * 1000), "key": pa.array(
        [None if i % 3 else f"k{i}" for i in range(1000)], pa.string())})

    def placement():
        (cols,) = prepare(batch, "t", 0).values()
        return [(p, part.positions.to_pylist()) for p, part in
                route(cols, 4, HashingScheme.JavaStringHash, start_of("spark-job-x-3", 4), 100)]

    assert placement() == placement()
    assert len(placement()) == 4
