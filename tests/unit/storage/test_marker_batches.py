"""Shared marker transactions (:mod:`magnetar.storage.object.marker_batches`)
over the in-memory store (the same transaction contract as etcd's; the
real etcd: tests/integration/object_storage/test_marker_batches.py):
within etcd's bounds, a failed compare costs only its own ledger, a key
is written once per transaction."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import MemoryMetadataStore
from magnetar.metadata.store import MAX_TRANSACTION_OPS, Compare, Put, TransactionFailed
from magnetar.storage.object.marker_batches import MARKERS_PER_TRANSACTION, MarkerBatches
from magnetar_harness.read_tap import ReadTap


def marker_of(lid: int) -> tuple[list[Compare], Put]:
    return ([Compare(f"/l/{lid}", 0), Compare(f"/l/{lid}/compacted", -1)],
            Put(f"/l/{lid}/compacted", b'{"entries":1}'))


class Sizes(ReadTap):
    """The tap, keeping each transaction's compares and writes counted."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.sizes: list[tuple[int, int]] = []

    async def transaction(self, compares, writes, *, versions=True):
        self.sizes.append((len(compares), len(writes)))
        return await super().transaction(compares, writes, versions=versions)


async def ledgers(store, count: int) -> None:
    for lid in range(count):
        await store.put(f"/l/{lid}", b"{}", -1)


async def test_markers_queued_together_go_in_few_transactions_within_the_bounds():
    store = Sizes(MemoryMetadataStore())
    count = 2 * MARKERS_PER_TRANSACTION + 3
    await ledgers(store, count)
    batches = MarkerBatches(store)
    await asyncio.gather(*(batches.write(*marker_of(lid)) for lid in range(count)))
    assert all([await store.exists(f"/l/{lid}/compacted") for lid in range(count)])
    # all queued before the first transaction began: at once, in transactions of 64 at most
    assert [w for _, w in store.sizes] == [MARKERS_PER_TRANSACTION, MARKERS_PER_TRANSACTION, 3]
    assert max(c for c, _ in store.sizes) <= MAX_TRANSACTION_OPS
    assert batches.markers == count and batches.transactions == 3


async def test_a_failed_compare_fails_its_own_ledger_and_the_others_go_again():
    store = Sizes(MemoryMetadataStore())
    await ledgers(store, 10)
    await store.delete("/l/3")  # deleted
    await store.put("/l/6", b"{}", 0)  # fenced: its version moved on
    batches = MarkerBatches(store)
    results = await asyncio.gather(*(batches.write(*marker_of(lid)) for lid in range(10)), return_exceptions=True)
    failed = {lid: r for lid, r in enumerate(results) if r is not None}
    assert set(failed) == {3, 6}
    assert all(isinstance(r, TransactionFailed) for r in failed.values())
    assert failed[3].keys == ["/l/3"] and failed[6].keys == ["/l/6"]
    assert [await store.exists(f"/l/{lid}/compacted") for lid in range(10)] == [lid not in (3, 6) for lid in range(10)]
    assert [w for _, w in store.sizes] == [10, 8]  # the batch, then the batch without the two


async def test_a_second_marker_of_one_key_waits_for_the_next_transaction():
    store = MemoryMetadataStore()
    await ledgers(store, 3)
    batches = MarkerBatches(store, spacing_s=0)
    first = batches.write(*marker_of(0))  # queued, not sent: nothing runs until the gather below
    results = await asyncio.gather(first, batches.write(*marker_of(1)), batches.write(*marker_of(1)),
                                   return_exceptions=True)
    assert results[0] is None and results[1] is None
    with pytest.raises(TransactionFailed):  # it compared the marker absent: written by the first
        raise results[2]


async def test_an_idle_marker_waits_for_nothing_and_one_cancelled_while_queued_is_not_sent():
    store = Sizes(MemoryMetadataStore())
    await ledgers(store, 3)
    batches = MarkerBatches(store, spacing_s=30)
    await asyncio.wait_for(batches.write(*marker_of(0)), 5)  # not 30 s: nothing came before it
    queued = asyncio.ensure_future(batches.write(*marker_of(1)))
    await asyncio.sleep(0)
    assert batches.queued == 1
    queued.cancel()
    await asyncio.gather(queued, return_exceptions=True)
    assert batches.queued == 0 and not await store.exists("/l/1/compacted")
    batches.stop()
