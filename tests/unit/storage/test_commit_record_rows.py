"""A commit's format-2 record from rows (storage/object/commit_records.py
``record_rows``): the committer encodes each ledger's section once, as a
row, and makes no Section object for it; a writer's fenced ledgers are
refused and the record holds exactly the others."""
from __future__ import annotations

from magnetar.metadata import MemoryMetadataStore
from magnetar.storage.object import commit_groups as groups_module
from magnetar.storage.object.commit import Committer
from magnetar.storage.object.commit_records import decode_record, encode_row, record_key, record_rows
from magnetar.storage.object.object_ledger import ObjectLedger
from magnetar.storage.object.writer_fence import WriterFence


async def _fence(store: MemoryMetadataStore) -> WriterFence:
    fence = WriterFence("w1")
    await fence.start(store, await store.create_session())
    return fence


async def test_fenced_ledgers_are_refused_and_the_record_holds_the_others():
    store = MemoryMetadataStore()
    fence = await _fence(store)
    fence.fenced = {900, 2}  # 900: deleted long ago, in no commit; 2: in this one
    ids = [1, 2, 3]
    rows = [encode_row(lid, 0, 1, 10 * lid, 10) for lid in ids]
    committed, refused = await record_rows(store, fence, "data/s/1", ids, rows)
    assert (committed, refused) == ([1, 3], [2])
    key, sections = decode_record((await store.get(record_key("w1", 1))).value)
    assert key == "data/s/1"
    assert [(lid, s.offset) for lid, s in sections] == [(1, 10), (3, 30)]


async def test_a_commit_makes_no_section_object_per_format_2_ledger(monkeypatch):
    made = []
    real = groups_module.new_section
    monkeypatch.setattr(groups_module, "new_section", lambda *a: made.append(a) or real(*a))

    class Objects:
        async def put(self, key, blob, if_absent=False):
            return None

    store = MemoryMetadataStore()
    fence = await _fence(store)
    committer = Committer(store, Objects(), interval_s=0.0, max_bytes=1 << 30)  # type: ignore[arg-type]
    ledgers = [ObjectLedger(100 + i, 0) for i in range(50)]
    for ledger in ledgers:
        ledger.writer = fence
    told = []
    import asyncio
    loop = asyncio.get_running_loop()
    committer.submit_many([(ledger, (b"entry",), 13, told.append) for ledger in ledgers], loop)
    await committer.close()
    assert told == [None] * 50
    assert made == []
    assert [ledger.entry_count for ledger in ledgers] == [1] * 50
    assert [ledger.sections[0].length for ledger in ledgers] == [13] * 50
    key, sections = decode_record((await store.get(record_key("w1", 1))).value)
    assert [lid for lid, _ in sections] == [ledger.ledger_id for ledger in ledgers]
    assert all(s.key == key == ledgers[0].sections[0].key for _, s in sections)
