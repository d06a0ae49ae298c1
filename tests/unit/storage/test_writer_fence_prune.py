"""A live writer's fence key stays small: the writer empties its ``fenced``
list once it has read enough ids there, and refuses them for good.

Every fence of one of its ledgers (a takeover's, a deletion by another
broker) rewrites the writer's one key whole; without the prune a writer
living long enough carries every id ever fenced, in every such rewrite.
Over the in-memory store and a real etcd.
"""
from __future__ import annotations

from magnetar.storage.object.commit_records import encode_row, record_rows
from magnetar.storage.object.index import ledger_key, ledger_layout, ledger_record
from magnetar.storage.object.writer_fence import WriterFence, fence_ledgers, fenced_of, writer_key


def fenced_record(value: bytes) -> bytes:
    _, doc = ledger_layout(value)
    return ledger_record("fenced", str(doc["writer"]), layout=2, since=doc.get("from"), fenced_by="new-owner")


async def live_writer(store, ledgers: range) -> WriterFence:
    fence = WriterFence()
    await fence.start(store, await store.create_session(30.0))
    for i in ledgers:
        await store.put(ledger_key(i), ledger_record("open", fence.writer, layout=2, since=1), -1)
    return fence


async def named(store, fence: WriterFence) -> set[int]:
    return fenced_of((await store.get(writer_key(fence.writer))).value)


async def commit(store, fence: WriterFence, ids: list[int]) -> tuple[list[int], list[int]]:
    rows = [encode_row(lid, 0, 1, 10 * n, 10) for n, lid in enumerate(ids)]
    return await record_rows(store, fence, "data/c/1", ids, rows)


async def test_the_writer_empties_its_key_and_still_refuses_every_id_it_named(memory_or_etcd_store):
    store = memory_or_etcd_store
    fence = await live_writer(store, range(1, 1302))
    await fence_ledgers(store, [ledger_key(i) for i in range(1, 1201)], fence.writer, fenced_record)
    assert len(await named(store, fence)) == 1200

    # Its next commit fails the compare, reads the key (1,200 ids: past PRUNE_AT) and empties it.
    assert await commit(store, fence, [1300]) == ([1300], [])
    assert await named(store, fence) == set()  # without the prune: all 1,200, rewritten by every fence
    assert fence.fenced == set(range(1, 1201))
    assert (await store.get(writer_key(fence.writer))).version == fence.version  # its commits compare it

    # Another fence, read again: the pruned ids are not forgotten (the key names only the new one).
    await fence_ledgers(store, [ledger_key(1250)], fence.writer, fenced_record)
    await fence.refresh(store)
    assert fence.fenced == set(range(1, 1201)) | {1250}
    committed, refused = await commit(store, fence, [5, 1250, 1301])
    assert (committed, sorted(refused)) == ([1301], [5, 1250])
    assert await named(store, fence) == {1250}  # under PRUNE_AT: left in the key


async def test_a_fence_landing_during_the_prune_stays_named(memory_or_etcd_store, monkeypatch):
    store = memory_or_etcd_store
    fence = await live_writer(store, range(1, 5))
    await fence_ledgers(store, [ledger_key(1), ledger_key(2)], fence.writer, fenced_record)
    real_get = store.get
    late = []

    async def get_then_fence(key):
        record = await real_get(key)
        if key == writer_key(fence.writer) and not late:  # between the writer's read and its prune
            monkeypatch.setattr(store, "get", real_get)
            late.append(await fence_ledgers(store, [ledger_key(3)], fence.writer, fenced_record))
        return record

    monkeypatch.setattr(store, "get", get_then_fence)
    await fence.refresh(store, prune_at=2)
    assert late == [{ledger_key(3)}]
    # The prune's compare failed: nothing emptied, ledger 3 still named for the writer's next read.
    assert await named(store, fence) == {1, 2, 3}
    assert fence.fenced == {1, 2}
    await fence.refresh(store, prune_at=2)
    assert fence.fenced == {1, 2, 3}
    assert await named(store, fence) == set()
    assert await commit(store, fence, [3, 4]) == ([4], [3])
