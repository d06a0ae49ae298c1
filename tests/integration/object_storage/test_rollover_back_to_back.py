"""A rollover that starts as the previous one (onto a ledger created ahead)
records its ledger: the ledger switched to filled up while it was being
recorded, and no next ledger was ready, so appends wait (parked) for the
second. The first's end un-parked them: appends went on to the ledger the
second was sealing and failed ('ledger N takes no more writes', the
occasional failure of test_many_switches_in_a_row_lose_and_reorder_nothing).
Real etcd, real SeaweedFS, the storage layer alone."""
from __future__ import annotations

import asyncio

from magnetar.storage.object import object_ledger
from tests.helpers import wait_until
from tests.integration.object_storage.test_rollover_switch import _at_a_blocked_rollover, latency_factory


async def test_appends_during_a_rollover_started_by_the_previous_one_s_end_wait_for_it(
        tmp_path, etcd_store, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)  # prepared at 3 sections, full at 6
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)
    factory = latency_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/back-to-back")
    release, acked, pending, old = await _at_a_blocked_rollover(ml)
    switched = ml._appends.current
    # Fill the ledger switched to while its record is held: a section per commit.
    while not switched.full:
        n = switched.entry_count
        pending.append((b"fill", ml.append(b"fill")))
        await wait_until(lambda: switched.entry_count > n, what="a commit into the switched-to ledger")
    assert ml._roller.prepared is None  # nothing prepared: the next rollover parks appends
    first_save, second = ml._save, asyncio.Event()
    second_blocked = asyncio.Event()

    async def held_second(docs, properties, beside=None):
        if ml._appends._rolling and ml._appends._unrecorded is None:  # the second rollover's (nothing switched)
            second_blocked.set()
            await second.wait()
        return await first_save(docs, properties, beside)

    ml._save = held_second
    release.set()
    await asyncio.wait_for(second_blocked.wait(), 10)  # the first recorded; the second sealed the ledger
    assert ml._appends.current is switched
    after = [ml.append(b"after-%d" % i) for i in range(3)]
    # They wait for the second rollover (before: buffered for the sealed ledger, refused by it).
    assert len(ml._appends._waiting) == 3
    second.set()
    positions = await asyncio.gather(*after)
    assert all(p.ledger_id > switched.ledger_id for p in positions)
    assert [p.entry_id for p in positions] == [0, 1, 2]
    await asyncio.gather(*(f for _, f in pending))
    await factory.close()
