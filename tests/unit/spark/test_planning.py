"""Admission control arithmetic and range splitting."""
from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

import pyspark  # noqa: E402,F401  (a test dependency: missing must fail, not skip)

from pyspark_magnetar.admission import next_end  # noqa: E402
from pyspark_magnetar.offsets import TopicPartition  # noqa: E402
from pyspark_magnetar.ranges import OffsetRange, split_ranges  # noqa: E402

A, B, C = (TopicPartition("persistent://public/default/t", i) for i in range(3))


def test_everything_when_unlimited_or_under_budget():
    start = {A: 0, B: 10}
    latest = {A: 5, B: 12}
    assert next_end(start, latest, None) == latest
    assert next_end(start, latest, 100) == latest


def test_budget_is_shared_by_backlog():
    end = next_end({A: 0, B: 0, C: 0}, {A: 600, B: 300, C: 100}, 100)
    assert end == {A: 60, B: 30, C: 10}


def test_vanished_and_rewound_partitions_stay_put():
    assert next_end({A: 10, B: 20}, {A: 15}, None) == {A: 15, B: 20}
    assert next_end({A: 10}, {A: 3}, None) == {A: 10}


@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 10_000)), min_size=1, max_size=8),
       st.integers(1, 5000))
def test_budget_properties(pairs, budget):
    start = {TopicPartition("persistent://public/default/t", i): s for i, (s, _) in enumerate(pairs)}
    latest = {tp: s + extra for (tp, s), (_, extra) in zip(start.items(), pairs)}
    end = next_end(start, latest, budget)
    total = sum(latest[tp] - start[tp] for tp in start)
    taken = sum(end[tp] - start[tp] for tp in start)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    assert taken == min(total, budget)  # exact budget use, and progress whenever there is a backlog


def test_split_even_pieces_and_skips_empty():
    ranges = split_ranges({A: 0, B: 7, C: 5}, {A: 100, B: 7, C: 3}, 30)
    assert [(r.tp, r.start, r.end) for r in ranges] == [(A, 0, 25), (A, 25, 50), (A, 50, 75), (A, 75, 100)]
    assert split_ranges({A: 0}, {A: 30}, 30) == [OffsetRange(A, 0, 30)]


def test_ranges_pickle():
    rng = OffsetRange(B, 3, 9)
    assert pickle.loads(pickle.dumps(rng)) == rng and len(rng) == 6


def test_min_partitions_splits_only_when_partitions_are_fewer():
    # Two partitions, two tasks wanted: one task each, even when one is a little longer (it was cut in two).
    ranges = split_ranges({A: 0, B: 0}, {A: 504_246, B: 495_754}, 1_000_000, min_partitions=2)
    assert [(r.tp, r.start, r.end) for r in ranges] == [(A, 0, 504_246), (B, 0, 495_754)]
    # Fewer partitions than wanted: the longest pieces are cut first, at least min_partitions in all.
    ranges = split_ranges({A: 0, B: 0}, {A: 300, B: 100}, 1_000, min_partitions=4)
    assert [(r.tp, r.start, r.end) for r in ranges] == [(A, 0, 100), (A, 100, 200), (A, 200, 300), (B, 0, 100)]
    assert len(split_ranges({A: 0}, {A: 1200}, 1_000_000, min_partitions=5)) == 5
    assert len(split_ranges({A: 0}, {A: 3}, 1_000_000, min_partitions=5)) == 3  # no more ranges than offsets
    # max_records still bounds every range.
    assert all(len(r) <= 30 for r in split_ranges({A: 0, B: 0}, {A: 100, B: 10}, 30, min_partitions=2))
