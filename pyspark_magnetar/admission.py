"""Admission control: how far the next micro-batch reads.

:func:`next_end` is pure so the arithmetic can be tested without Spark.
With a row budget (``maxRecordsPerTrigger``), the budget is shared among
the partitions with a backlog in proportion to their backlogs (largest
remainder, so the shares add up to the budget exactly and a budget of at
least one always makes progress). Partitions that disappeared keep their
offsets, so the offset map never loses a position it has checkpointed.
"""
from __future__ import annotations

from typing import Mapping

from .offsets import TopicPartition


def next_end(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
             max_rows: int | None) -> dict[TopicPartition, int]:
    """End offsets for the batch after ``start`` given the ``latest``
    available offsets, reading at most ``max_rows`` messages (None: all).

    Only partitions in ``start`` advance; a partition whose latest is below
    its start is left where it is (the caller decides whether that is data
    loss). Never returns an offset below ``start`` or above ``latest``.
    """
    end = dict(start)
    backlog = {tp: latest[tp] - off for tp, off in start.items() if tp in latest and latest[tp] > off}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        for tp, n in backlog.items():
            end[tp] = start[tp] + n
        return end
    shares = {tp: max_rows * n // total for tp, n in backlog.items()}
    left = max_rows - sum(shares.values())
    # Hand the rows lost to rounding to the largest fractional parts (ties: partition order).
    by_remainder = sorted(backlog, key=lambda tp: (-(max_rows * backlog[tp] % total), tp))
    for tp in by_remainder:
        if left == 0:
            break
        if shares[tp] < backlog[tp]:
            shares[tp] += 1
            left -= 1
    for tp, n in shares.items():
        end[tp] = start[tp] + n
    return end
