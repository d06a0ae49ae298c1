"""A takeover's waves of recoveries read a dead writer's commit records once.

A broker loads a dead broker's topics 256 at a time and each wave's
recoveries share a scan of the writer's records; before, each wave read
and decoded all of them again (40 scans at 10,000 ledgers:
bench/takeover_scans.py). A dead writer's records are final, so the first
scan keeps them; a live writer's are read afresh by every wave. Over the
in-memory store and a real etcd.
"""
from __future__ import annotations

import asyncio

from magnetar.storage.object import final_records
from magnetar.storage.object.commit_records import RecordScans, encode_row, encode_rows, record_key
from magnetar.storage.object.writer_fence import alive_key

WRITER = "w-1"


async def write_records(store, ledgers: range, sections: int, seq: int = 0) -> int:
    """``sections`` records after ``seq``, each naming a section of every
    ledger (entry ``seq``, one entry); returns the last seq."""
    for _ in range(sections):
        rows = [encode_row(lid, seq, 1, 10 * i, 10) for i, lid in enumerate(ledgers)]
        seq += 1
        await store.put(record_key(WRITER, seq), encode_rows(f"data/c/{seq}", rows))
    return seq


async def wave(scans: RecordScans, ledgers) -> dict[int, list[int]]:
    """One wave of recoveries asked at once: each ledger's entry ids found."""
    found = await asyncio.gather(*(scans.sections(WRITER, 1, lid) for lid in ledgers))
    return {lid: [s.first for s in sections] for lid, sections in zip(ledgers, found)}


async def test_the_waves_of_a_dead_writers_takeover_read_its_records_once(memory_or_etcd_store):
    store = memory_or_etcd_store
    await write_records(store, range(1, 601), 5)  # no alive key: its session is over
    scans = RecordScans(store)
    for first in (1, 201, 401):
        found = await wave(scans, range(first, first + 200))
        assert found == {lid: [0, 1, 2, 3, 4] for lid in range(first, first + 200)}
    assert scans.reads == 1  # without the kept records: one per wave, 3

    # A ledger handed out already, recovered again (a second load): read afresh, all its sections.
    assert (await wave(scans, range(1, 11)))[5] == [0, 1, 2, 3, 4]
    assert scans.reads == 2


async def test_a_live_writers_records_are_read_by_every_wave_and_a_later_commit_is_seen(memory_or_etcd_store):
    store = memory_or_etcd_store
    await store.put(alive_key(WRITER), b"{}")
    seq = await write_records(store, range(1, 401), 3)
    scans = RecordScans(store)
    assert (await wave(scans, range(1, 201)))[1] == [0, 1, 2]
    # A commit of the live writer lands after the first wave read: the second wave must see it.
    await write_records(store, range(1, 401), 1, seq=seq)
    found = await wave(scans, range(201, 401))
    assert found[300] == [0, 1, 2, 3]
    assert scans.reads == 2


async def test_past_the_bound_each_wave_reads_what_it_wants(memory_or_etcd_store, monkeypatch):
    store = memory_or_etcd_store
    monkeypatch.setattr(final_records, "MAX_SECTIONS", 100)
    await write_records(store, range(1, 101), 2)  # 200 sections: past the bound
    scans = RecordScans(store)
    for first in (1, 51):
        assert await wave(scans, range(first, first + 50)) == {lid: [0, 1] for lid in range(first, first + 50)}
    assert scans.reads == 2
    assert scans._final == {}


async def test_what_is_kept_goes_once_unused(memory_or_etcd_store, monkeypatch):
    store = memory_or_etcd_store
    await write_records(store, range(1, 101), 2)
    scans = RecordScans(store)
    await wave(scans, range(1, 51))
    monkeypatch.setattr(final_records, "KEEP_S", -1.0)  # stale at once
    assert (await wave(scans, range(51, 101)))[60] == [0, 1]
    assert scans.reads == 2
