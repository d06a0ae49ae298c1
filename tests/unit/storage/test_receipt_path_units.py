"""Pieces of the path from a completed commit to its receipts, alone (no
I/O): an object ledger's ``full``/``nearly_full`` follow its sections, and
the managed ledgers woken by one commit are told in one pass of the loop."""
from __future__ import annotations

import asyncio

import magnetar.storage.object.object_ledger as object_ledger
from magnetar.storage.listeners import EntryListeners
from magnetar.storage.object.object_ledger import ObjectLedger
from magnetar.storage.object.index import Section


def _section(first: int) -> Section:
    return Section(first, 1, "k", first, 10)


def test_full_and_nearly_full_follow_the_sections_committed_and_used(monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)  # nearly full at 3, full at 6
    ledger = ObjectLedger(1, 1)
    seen = []
    for i in range(6):
        ledger._committed(_section(i))
        seen.append((ledger.nearly_full, ledger.full))
    assert seen == [(False, False), (False, False), (True, False), (True, False), (True, False), (True, True)]
    assert ledger.entry_count == 6 and ledger.size == 60
    ledger.use([_section(0)], compacted=True)  # a sealed ledger's one chunk
    assert (ledger.nearly_full, ledger.full) == (False, False)
    assert ObjectLedger(2, 1, [_section(i) for i in range(6)]).full  # opened with its sections


def test_the_ledgers_woken_in_one_pass_are_told_in_one_loop_callback_in_wake_order():
    loop = asyncio.new_event_loop()  # asyncio's own loop: its ready queue is inspectable
    try:
        told = []
        many = [EntryListeners(f"t/{i}", loop) for i in range(50)]
        for i, listeners in enumerate(many):
            listeners.add(lambda i=i: told.append(i))
        idle = EntryListeners("t/idle", loop)  # nobody listening: nothing scheduled for it
        ready = len(loop._ready)
        for listeners in many + [idle]:
            listeners.wake()
            listeners.wake()  # coalesced: once per pass
        assert len(loop._ready) == ready + 1  # before: a loop callback per managed ledger
        loop.run_until_complete(asyncio.sleep(0))
        assert told == list(range(50))
        many[7].wake()  # a later pass is scheduled again
        loop.run_until_complete(asyncio.sleep(0))
        assert told[-1] == 7 and len(told) == 51
    finally:
        loop.close()


def test_a_wake_during_the_pass_is_told_in_a_next_pass_and_a_failing_listener_stops_nobody():
    loop = asyncio.new_event_loop()
    try:
        a, b = EntryListeners("t/a", loop), EntryListeners("t/b", loop)
        told = []

        def first():
            told.append("a")
            b.wake()

        def broken():
            raise RuntimeError("a listener's bug")

        a.add(first)
        a.add(broken)
        b.add(lambda: told.append("b"))
        a.wake()
        loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(asyncio.sleep(0))
        assert told == ["a", "b"]
    finally:
        loop.close()
