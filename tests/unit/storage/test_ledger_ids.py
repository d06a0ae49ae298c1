"""Ledger ids in blocks (storage/ledger_ids.py): one counter increment per
block, blocks growing while used up fast, callers sharing the increment in
flight, failures reaching every waiter and the next call retrying, ids
increasing per allocator and above what a managed ledger already names,
unique across allocators on one store (memory and real etcd)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import MemoryMetadataStore, MetadataError
from magnetar.storage import StorageError
from magnetar.storage.ledger_ids import LedgerIds
from magnetar.storage.ledger_meta import LEDGER_ID_COUNTER
from magnetar_harness.read_tap import ReadTap


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_blocks_double_while_used_up_fast_and_hand_out_ids_without_increments(memory_or_etcd_store):
    store = ReadTap(memory_or_etcd_store)
    clock = Clock()
    ids = LedgerIds(store, clock=clock)
    got = [await ids.next() for _ in range(1 + 2 + 4 + 8 + 16 + 32 + 64 + 128 + 256 * 3)]
    assert got == list(range(1, len(got) + 1))
    # 1, 2, ..., 256, then 256 a block: 9 + 2 increments for 1,279 ids (before: one per id).
    assert [c for c in store.writes if c[0] == "increment"] == (
        [("increment", LEDGER_ID_COUNTER, 2 ** i) for i in range(9)] + [("increment", LEDGER_ID_COUNTER, 256)] * 2)
    assert ids.reservations == 11


async def test_a_quiet_broker_keeps_its_blocks_small(memory_or_etcd_store):
    clock = Clock()
    ids = LedgerIds(memory_or_etcd_store, clock=clock)
    for _ in range(1 + 2 + 4):
        await ids.next()
        clock.now += 0.1  # used up within a second: grows
    assert ids.block == 4
    for _ in range(12):
        clock.now += 60  # one ledger a minute: each block outlives 16 s and shrinks
        await ids.next()
    assert ids.block <= 2


async def test_concurrent_callers_share_one_increment_in_flight(memory_or_etcd_store):
    store = ReadTap(memory_or_etcd_store)
    ids = LedgerIds(store, first_block=64)
    got = await asyncio.gather(*(ids.next() for _ in range(50)))
    assert sorted(got) == list(range(1, 51))
    assert ids.reservations == 1  # before: 50 increments, serialized on etcd


async def test_a_burst_of_callers_is_served_in_order_in_blocks_sized_to_it(memory_or_etcd_store):
    """The rollovers of a many-topic sending ask for thousands of ids at
    once: blocks are sized to the queue (4 increments for 1,000 callers,
    not 1, 2, 4, ... 256: 11), and ids go out in the callers' order."""
    store = ReadTap(memory_or_etcd_store)
    ids = LedgerIds(store)
    got = await asyncio.gather(*(ids.next() for _ in range(1000)))
    assert got == list(range(1, 1001))
    assert ids.reservations == 4
    assert [c[2] for c in store.writes if c[0] == "increment"] == [256, 256, 256, 232]  # the last: the rest


async def test_a_failed_increment_fails_its_waiters_and_the_next_call_retries(memory_or_etcd_store):
    store = ReadTap(memory_or_etcd_store)
    ids = LedgerIds(store, first_block=4)
    store.failing_writes = LEDGER_ID_COUNTER
    results = await asyncio.gather(*(ids.next() for _ in range(3)), return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results) and len(results) == 3
    assert "allocating a ledger id failed" in str(results[0])
    store.failing_writes = None
    assert await ids.next() == 1
    assert [await ids.next() for _ in range(3)] == [2, 3, 4]


async def test_ids_above_what_the_managed_ledger_names_drop_a_block_left_behind(memory_or_etcd_store):
    """Two brokers' blocks interleave: a topic moved from the one with the
    newer block must still get a greater id (positions are ordered by ledger id)."""
    a, b = LedgerIds(memory_or_etcd_store, first_block=16), LedgerIds(memory_or_etcd_store, first_block=16)
    assert await a.next() == 1  # a holds 1..16
    moved = await b.next()  # b holds 17..32: a topic's ledger there, then the topic moves to a
    assert moved == 17
    assert await a.next(above=moved) > moved  # before: 2, below the topic's ledger
    assert await a.next() > moved  # the dropped block's ids are never handed out


async def test_a_counter_behind_the_ids_in_use_is_moved_past_them(memory_or_etcd_store):
    ids = LedgerIds(memory_or_etcd_store, first_block=4)
    first = await ids.next(above=1000)
    assert first == 1001
    assert [await ids.next() for _ in range(3)] == [1002, 1003, 1004]


async def test_two_allocators_on_one_store_never_hand_out_the_same_id(memory_or_etcd_store):
    a, b = LedgerIds(memory_or_etcd_store), LedgerIds(memory_or_etcd_store)

    async def take(ids: LedgerIds, n: int) -> list[int]:
        got = []
        for _ in range(n):
            got.append(await ids.next())
            await asyncio.sleep(0)
        return got

    got_a, got_b = await asyncio.gather(take(a, 300), take(b, 300))
    assert got_a == sorted(got_a) and got_b == sorted(got_b)  # strictly increasing per allocator
    assert len(set(got_a) | set(got_b)) == 600


async def test_a_caller_cancelled_does_not_cancel_the_increment_others_wait_on(memory_or_etcd_store):
    ids = LedgerIds(memory_or_etcd_store, first_block=8)
    first = asyncio.ensure_future(ids.next())
    second = asyncio.ensure_future(ids.next())
    await asyncio.sleep(0)
    first.cancel()
    assert await second in (1, 2)


async def test_the_store_s_errors_are_metadata_errors_the_allocator_turns_into_storage_errors():
    class Down(MemoryMetadataStore):
        async def increment(self, key, delta=1):
            raise MetadataError("etcd unreachable")

    with pytest.raises(StorageError):
        await LedgerIds(Down()).next()
