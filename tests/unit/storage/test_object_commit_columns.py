"""The object committer queues and groups batches as columns: no object per
batch for the garbage collector to walk.

At 10,000 written topics a commit holds about 10,000 batches, alive from
the hand-over to the receipts; an object each (the committer's batch record
before) was that many more for every collection in between to walk
(docs/object-storage.md, "The commit side's objects out of the collector's
sight")."""
from __future__ import annotations

import asyncio
import gc

from magnetar.storage.object.commit import Committer
from magnetar.storage.object.object_ledger import ObjectLedger


def _told(error) -> None:
    pass


async def test_queued_batches_add_no_tracked_object_each():
    committer = Committer(None, None, interval_s=10.0, max_bytes=1 << 30)  # type: ignore[arg-type]
    ledgers = [ObjectLedger(i, 1) for i in range(1000)]
    for ledger in ledgers:
        ledger.gather_s = 10.0  # the cost profile: nothing is due during the test
    writes = [(ledger, (b"x",), 9, _told) for ledger in ledgers]
    committer.submit_many(writes[:1], asyncio.get_running_loop())  # the commit task exists
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        committer.submit_many(writes[1:], asyncio.get_running_loop())
        added = len(gc.get_objects()) - before
    finally:
        gc.enable()
        committer.abandon()
    assert committer._pending == 1000
    assert added < 20, f"{added} tracked objects for 999 batches"


def test_a_ledger_s_kept_bytes_go_when_it_closes_through_a_reference_not_a_closure():
    from magnetar.storage.object.kept_sections import KeptSections

    kept = KeptSections()
    kept.start(7)
    kept.add(7, b"abc")
    ledger = ObjectLedger(7, 1)
    ledger.kept = kept
    ledger.close()
    assert kept.bytes == 0 and ledger.kept is None
    ledger.close()  # once only
