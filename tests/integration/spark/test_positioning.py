"""The connector's starting entry for an offset range, found by the broker's
seek by offset, in whichever ledger it lies (no Spark session needed).

The broker rolls ledgers every 4 entries; entries are batches of 300 and
single messages, so offsets past MIN_OFFSET_TO_POSITION lie in old ledgers.
"""
from __future__ import annotations

import uuid

import pytest

from magnetar.client import AsyncClient, Client, MessageId
from pyspark_magnetar.offsets import TopicPartition
from pyspark_magnetar.positioning import MIN_OFFSET_TO_POSITION, start_position
from pyspark_magnetar.scan import RangeScanner

from tests.helpers import wait_for
from magnetar_harness.broker import configured_broker

LAYOUT = [300, 1, 300, 1, 300, 1, 300, 1, 300, 1, 300, 1]
TOTAL = sum(LAYOUT)


@pytest.fixture(scope="module")
def small_ledgers(tmp_path_factory):
    proc = configured_broker(tmp_path_factory.mktemp("positioning"),
                                     "[storage]\nmax_entries_per_ledger = 4\n").start()
    yield proc
    if proc.alive:
        assert proc.stop() == 0, proc.log()


@pytest.fixture(scope="module")
def topic_ids(small_ledgers) -> tuple[TopicPartition, list[MessageId]]:
    """A topic holding LAYOUT (payload = offset) and its ids in offset order."""
    tp = TopicPartition(f"persistent://public/default/positioning-{uuid.uuid4().hex[:8]}")
    with Client(small_ledgers.service_url, operation_timeout_seconds=15) as client:
        single = client.create_producer(tp.name)
        batcher = client.create_producer(tp.name, batching_enabled=True, batching_max_messages=1000,
                                         batching_max_publish_delay_ms=60_000)
        ids: list[MessageId] = []
        for size in LAYOUT:
            if size == 1:
                ids.append(single.send(b"%d" % len(ids)))
                continue
            got: list[MessageId] = []
            for i in range(size):
                batcher.send_async(b"%d" % (len(ids) + i), lambda result, mid: got.append(mid))
            batcher.flush()
            wait_for(lambda: len(got) == size, what="batch receipts")
            ids.extend(sorted(got, key=lambda mid: mid.offset))
    assert [mid.offset for mid in ids] == list(range(TOTAL))
    assert len({mid.ledger_id() for mid in ids}) >= 3
    return tp, ids


@pytest.fixture
async def client(small_ledgers):
    c = AsyncClient(small_ledgers.service_url, operation_timeout_seconds=15)
    yield c
    await c.close()


async def test_start_position_is_the_entry_holding_the_offset(client, topic_ids):
    tp, ids = topic_ids
    last_ledger = ids[-1].ledger_id()
    targets = [o for o in (MIN_OFFSET_TO_POSITION, 1203, 1204, 1505, TOTAL - 1) if o < TOTAL]
    assert any(ids[o].ledger_id() != last_ledger for o in targets), "no target in an older ledger"
    for offset in targets:
        got = await start_position(client, tp, offset)
        assert got.entry_key == ids[offset].entry_key and got.batch_index() == -1, f"offset {offset}"
    assert await start_position(client, tp, MIN_OFFSET_TO_POSITION - 1) == MessageId.earliest


async def test_range_scan_from_an_old_ledger_skips_only_its_entry(client, topic_ids):
    tp, ids = topic_ids
    start = next(o for o in range(MIN_OFFSET_TO_POSITION, TOTAL) if ids[o].batch_index() > 0)
    assert ids[start].ledger_id() != ids[-1].ledger_id()
    scanner = await RangeScanner.open(client, tp, start, start + 500, poll_timeout_ms=10_000,
                                      fail_on_data_loss=True)
    try:
        rows = []
        while entries := await scanner.next_entries(128):
            for batch in scanner.to_batches(entries):
                rows.extend(batch.select(["offset", "value"]).to_pylist())
    finally:
        await scanner.close()
    assert [(r["offset"], r["value"]) for r in rows] == [(o, b"%d" % o) for o in range(start, start + 500)]
    assert scanner.skipped == ids[start].batch_index()
