"""Fences of one writer's format-2 ledgers asked for at once go together.

A takeover loads a dead broker's topics as their clients reconnect, all at
once, and fences each topic's ledger; every fence rewrites the writer's one
key. One by one they failed each other's compare (200 at once: 7,197
transactions on a real etcd); gathered per writer they cost a transaction
per 127 ledgers. Over the in-memory store and a real etcd.
"""
from __future__ import annotations

import asyncio

from magnetar.storage.object import writer_fence
from magnetar.storage.object.fence_batches import FenceBatches
from magnetar.storage.object.index import ledger_key, ledger_layout, ledger_record

WRITER = "w-dead"


def fenced_record(value: bytes) -> bytes:
    _, doc = ledger_layout(value)
    return ledger_record("fenced", str(doc["writer"]), layout=2, since=doc.get("from"), fenced_by="new-owner")


async def ledgers_of_one_writer(store, n: int, writer_key: bool = True) -> list[str]:
    if writer_key:
        await store.put(writer_fence.writer_key(WRITER), writer_fence.fenced_value([]), -1)
    keys = [ledger_key(i) for i in range(1, n + 1)]
    for key in keys:
        await store.put(key, ledger_record("open", WRITER, layout=2, since=1), -1)
    return keys


def count_transactions(store, monkeypatch) -> list[int]:
    count = [0]
    real = store.transaction

    async def counted(*args, **kwargs):
        count[0] += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "transaction", counted)
    return count


async def test_many_fences_at_once_cost_a_transaction_per_batch(memory_or_etcd_store, monkeypatch):
    store = memory_or_etcd_store
    keys = await ledgers_of_one_writer(store, 300)
    transactions = count_transactions(store, monkeypatch)
    fences = FenceBatches(store, fenced_record)
    # Each ledger asked for twice at once (two loads of one topic): both hear True.
    answers = await asyncio.gather(*(fences.fence(key, WRITER) for key in keys + keys[:5]))
    assert answers == [True] * 305
    # Gathered in one or two batches, in transactions of at most 127
    # ledgers: without the batches, 300 at least (thousands on etcd).
    assert transactions[0] <= 6, transactions[0]
    assert fences.batches <= 2
    record = await store.get(writer_fence.writer_key(WRITER))
    assert writer_fence.fenced_of(record.value) == set(range(1, 301))
    for key in keys:
        _, doc = ledger_layout((await store.get(key)).value)
        assert doc["state"] == "fenced"
    await fences.close()


async def test_an_absent_ledger_is_not_fenced_and_a_dead_writers_key_is_not_needed(memory_or_etcd_store):
    store = memory_or_etcd_store
    keys = await ledgers_of_one_writer(store, 3, writer_key=False)  # the collector deleted the writer key
    fences = FenceBatches(store, fenced_record)
    answers = await asyncio.gather(*(fences.fence(key, WRITER) for key in [*keys, ledger_key(99)]))
    assert answers == [True, True, True, False]
    assert await store.get(writer_fence.writer_key(WRITER)) is None
    await fences.close()


async def test_one_by_one_the_fences_of_one_writer_all_land(memory_or_etcd_store):
    store = memory_or_etcd_store
    keys = await ledgers_of_one_writer(store, 3)
    for key in keys:
        assert await writer_fence.fence_ledger(store, key, WRITER, fenced_record)
    assert not await writer_fence.fence_ledger(store, ledger_key(99), WRITER, fenced_record)
    record = await store.get(writer_fence.writer_key(WRITER))
    assert writer_fence.fenced_of(record.value) == {1, 2, 3}


async def test_a_failed_batch_tells_its_askers_and_the_next_one_goes(memory_or_etcd_store, monkeypatch):
    from magnetar.metadata.store import MetadataError

    store = memory_or_etcd_store
    keys = await ledgers_of_one_writer(store, 2)
    real = store.transaction
    failures = [MetadataError("etcd is away")]

    async def fails_once(*args, **kwargs):
        if failures:
            raise failures.pop()
        return await real(*args, **kwargs)

    monkeypatch.setattr(store, "transaction", fails_once)
    fences = FenceBatches(store, fenced_record)
    first = await asyncio.gather(fences.fence(keys[0], WRITER), return_exceptions=True)
    assert isinstance(first[0], MetadataError)
    assert await fences.fence(keys[1], WRITER) is True
    assert writer_fence.fenced_of((await store.get(writer_fence.writer_key(WRITER))).value) == {2}
    await fences.close()


async def test_an_asker_gone_before_its_batch_fails_leaves_no_lost_error_logged(memory_or_etcd_store, monkeypatch):
    import gc

    from magnetar.metadata.store import MetadataError

    store = memory_or_etcd_store
    keys = await ledgers_of_one_writer(store, 1)
    release = asyncio.Event()

    async def fails_later(*args, **kwargs):
        await release.wait()
        raise MetadataError("etcd is away")

    monkeypatch.setattr(store, "transaction", fails_later)
    logged = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: logged.append(context.get("message")))
    try:
        fences = FenceBatches(store, fenced_record)
        asker = asyncio.create_task(fences.fence(keys[0], WRITER))
        await asyncio.sleep(0)  # its batch is in flight
        asker.cancel()
        await asyncio.gather(asker, return_exceptions=True)
        release.set()
        for _ in range(1000):  # the batch ends (its error goes to the cancelled asker's future)
            if not fences._running:
                break
            await asyncio.sleep(0.01)
        assert not fences._running
        del asker
        gc.collect()
        await asyncio.sleep(0)
        # without the callback: "Future exception was never retrieved"
        assert not [m for m in logged if m and "never retrieved" in m], logged
    finally:
        loop.set_exception_handler(None)
    await fences.close()
