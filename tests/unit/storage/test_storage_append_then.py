"""``ManagedLedger.append_then``: appends told through a callback, not a future
(the broker's per-entry publish path; contract in ``storage/waiters.py``)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.storage import ManagedLedgerClosedError, ManagedLedgerFencedError, Position, StorageError


def payload(i: int) -> bytes:
    return b"entry-%05d" % i


async def test_callbacks_and_futures_complete_in_append_order_across_rollovers(factories, wait_until):
    ml = await factories(max_entries_per_ledger=3).open("t")
    told: list[tuple[int, Position | None, BaseException | None]] = []
    futures = {}
    for i in range(20):
        if i % 4 == 0:  # mixed: the two kinds of waiter share one queue
            futures[i] = ml.append(payload(i))
            futures[i].add_done_callback(lambda f, i=i: told.append((i, f.result(), None)))
        else:
            ml.append_then(payload(i), lambda lid, eid, err, i=i: told.append((i, Position(lid, eid), err)))
    await wait_until(lambda: len(told) == 20, what="every append told")
    by_index = dict((i, pos) for i, pos, _ in told)
    assert all(err is None for _, _, err in told)
    positions = [by_index[i] for i in range(20)]
    assert positions == sorted(positions) and len(set(positions)) == 20
    assert len({p.ledger_id for p in positions}) == 7  # rolled every 3 entries, callbacks carried over
    # A callback's position is where the entry is.
    for i in (1, 5, 19):
        assert (await ml.read_entries(by_index[i], 1))[0].data == payload(i)
    # Callbacks run synchronously in completion order: the callback-only ones in append order.
    callback_order = [i for i, _, _ in told if i % 4]
    assert callback_order == sorted(callback_order)


async def test_a_closed_ledger_refuses_at_once_and_never_calls_back(factories):
    ml = await factories().open("t")
    await ml.close()
    told = []
    with pytest.raises(ManagedLedgerClosedError):
        ml.append_then(b"late", lambda lid, eid, err: told.append((lid, eid, err)))
    await asyncio.sleep(0)
    assert told == []


async def test_appends_refused_while_closing_leave_the_earlier_ones_in_order(factories, wait_until):
    """The order callers rely on: what append_then accepted is told in
    acceptance order, and a refusal in between is not told at all."""
    ml = await factories().open("t")
    told = []
    for i in range(3):
        ml.append_then(payload(i), lambda lid, eid, err, i=i: told.append((i, eid, err)))
    closing = asyncio.ensure_future(ml.close())
    await asyncio.sleep(0)
    with pytest.raises(StorageError):
        ml.append_then(payload(3), lambda lid, eid, err: told.append((3, eid, err)))
    await closing
    assert told == [(0, 0, None), (1, 1, None), (2, 2, None)]


async def test_bad_entries_raise_at_once(factories):
    ml = await factories().open("t")
    with pytest.raises(ValueError):
        ml.append_then(b"", lambda *a: None)


async def test_a_callback_that_raises_does_not_stop_the_next_ones(factories, wait_until):
    ml = await factories().open("t")
    told = []

    def broken(lid, eid, err):
        raise RuntimeError("a bug in a listener")

    ml.append_then(payload(0), broken)
    ml.append_then(payload(1), lambda lid, eid, err: told.append((lid, eid, err)))
    await wait_until(lambda: told, what="the second callback")
    assert told[0][2] is None and told[0][1] == 1
    assert ml.last_confirmed == Position(told[0][0], 1)


async def test_a_fenced_ledger_fails_every_callback_in_flight(factories, wait_until):
    first = await factories().open("t")
    told = []
    for i in range(5):
        first.append_then(payload(i), lambda lid, eid, err: told.append(err))
    await wait_until(lambda: len(told) == 5, what="the first appends")
    assert told == [None] * 5
    await factories().open("t")  # a second owner fences the first
    await wait_until(lambda: first.state == "fenced", what="the first owner fenced")
    with pytest.raises(ManagedLedgerFencedError):
        first.append_then(payload(5), lambda lid, eid, err: told.append(err))
    assert told == [None] * 5
