"""``ManagedLedger.append_then``: appends told through a callback, not a future,
once per run of appends that gave the same callback (the broker's per-entry
publish path; contract in ``storage/waiters.py``)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.storage import waiters
from magnetar.storage import ManagedLedgerClosedError, ManagedLedgerFencedError, Position, StorageError


def each(told: list, i: int | None = None):
    """A callback recording one (index, position, error) per entry of each run it hears of."""
    def on_stored(lid, first, count, err):
        for k in range(count):
            told.append((i, Position(lid, first + k) if err is None else None, err))
    return on_stored


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
            ml.append_then(payload(i), each(told, i))
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
        ml.append_then(b"late", each(told))
    await asyncio.sleep(0)
    assert told == []


async def test_appends_refused_while_closing_leave_the_earlier_ones_in_order(factories, wait_until):
    """The order callers rely on: what append_then accepted is told in
    acceptance order, and a refusal in between is not told at all."""
    ml = await factories().open("t")
    told = []
    for i in range(3):
        ml.append_then(payload(i), each(told, i))
    closing = asyncio.ensure_future(ml.close())
    await asyncio.sleep(0)
    with pytest.raises(StorageError):
        ml.append_then(payload(3), each(told, 3))
    await closing
    assert [(i, pos.entry_id, err) for i, pos, err in told] == [(0, 0, None), (1, 1, None), (2, 2, None)]


async def test_bad_entries_raise_at_once(factories):
    ml = await factories().open("t")
    with pytest.raises(ValueError):
        ml.append_then(b"", lambda *a: None)


async def test_a_callback_that_raises_does_not_stop_the_next_ones(factories, wait_until):
    ml = await factories().open("t")
    told = []

    def broken(lid, first, count, err):
        raise RuntimeError("a bug in a listener")

    ml.append_then(payload(0), broken)
    ml.append_then(payload(1), each(told))
    await wait_until(lambda: told, what="the second callback")
    assert told[0][2] is None and told[0][1].entry_id == 1
    assert ml.last_confirmed == told[0][1]


async def test_a_fenced_ledger_fails_every_callback_in_flight(factories, wait_until):
    first = await factories().open("t")
    told = []
    for i in range(5):
        first.append_then(payload(i), each(told))
    await wait_until(lambda: len(told) == 5, what="the first appends")
    assert [err for _, _, err in told] == [None] * 5
    await factories().open("t")  # a second owner fences the first
    await wait_until(lambda: first.state == "fenced", what="the first owner fenced")
    with pytest.raises(ManagedLedgerFencedError):
        first.append_then(payload(5), each(told))
    assert [err for _, _, err in told] == [None] * 5


async def test_a_run_of_appends_with_one_callback_is_told_in_one_call(factories, wait_until):
    """Appends that gave the same callback one after the other are told
    together (one call for a group commit's run); another callback between
    them splits the run; every entry is counted once, in order."""
    ml = await factories().open("t")
    calls = []
    shared = lambda lid, first, count, err: calls.append(("shared", first, count, err))  # noqa: E731
    other = lambda lid, first, count, err: calls.append(("other", first, count, err))  # noqa: E731
    for i in range(5):
        ml.append_then(payload(i), shared)
    ml.append_then(payload(5), other)
    for i in range(6, 9):
        ml.append_then(payload(i), shared)
    await wait_until(lambda: sum(c[2] for c in calls) == 9, what="every append told")
    assert [c[0] for c in calls] == ["shared", "other", "shared"]
    assert [(c[1], c[2]) for c in calls] == [(0, 5), (5, 1), (6, 3)]


async def test_runs_are_told_as_runs_among_futures_on_success_and_on_failure():
    """``waiters.complete`` and ``waiters.fail`` cut runs at every change of
    waiter; a future is told alone; the entry ids follow on across runs."""
    loop = asyncio.get_running_loop()
    calls = []
    a = lambda lid, first, count, err: calls.append(("a", lid, first, count, err))  # noqa: E731
    b = lambda lid, first, count, err: calls.append(("b", lid, first, count, err))  # noqa: E731
    fut = loop.create_future()
    waiters.complete([a, a, fut, a, b, b], 7, 10)
    assert calls == [("a", 7, 10, 2, None), ("a", 7, 13, 1, None), ("b", 7, 14, 2, None)]
    assert fut.result() == Position(7, 12)
    calls.clear()
    error = StorageError("disk failed")
    failed = loop.create_future()
    waiters.fail(iter([b, failed, a, a, a]), error)
    assert calls == [("b", -1, -1, 1, error), ("a", -1, -1, 3, error)]
    assert failed.exception() is error
