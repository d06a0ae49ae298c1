"""Reading a format-2 writer's commit records (storage/object/commit_records.py
``read_records``): a scan asks the store for pages of records, not for each
record apart, and finds exactly the wanted ledgers' sections, whatever other
ledgers' ids look like."""
from __future__ import annotations

from magnetar.metadata import MemoryMetadataStore
from magnetar.storage.object.commit_records import encode_record, read_records, record_key
from magnetar.storage.object.index import Section


class CountingStore(MemoryMetadataStore):
    """A memory store that counts the requests a scan makes: pages of
    records, and gets of single keys made outside a page."""

    pages = 0
    gets = 0
    _in_page = False

    async def children_records(self, key, start="", limit=64):
        self.pages += 1
        self._in_page = True
        try:
            return await super().children_records(key, start, limit)
        finally:
            self._in_page = False

    async def get(self, key):
        if not self._in_page:
            self.gets += 1
        return await super().get(key)


async def write(store, writer: str, records: int, ledgers: list[int]) -> None:
    for seq in range(records):
        key = f"data/w/{seq:08d}"
        await store.put(record_key(writer, seq), encode_record(
            key, [(lid, Section(seq * 10, 10, key, 100 * n, 100)) for n, lid in enumerate(ledgers)]))


async def test_a_scan_reads_pages_of_records_not_one_request_each():
    store = await CountingStore.open()
    await write(store, "w1", 1000, [7, 8])
    found = await read_records(store, "w1", 0, {7})
    assert [s.first for s in found[7]] == [seq * 10 for seq in range(1000)]
    assert store.gets == 0 and store.pages <= 3, (store.gets, store.pages)  # before: 1,000 gets
    store.pages = 0
    found = await read_records(store, "w1", 990, {8})
    assert [s.first for s in found[8]] == [seq * 10 for seq in range(990, 1000)] and store.pages == 1


async def test_a_scan_finds_only_the_wanted_ledgers_whatever_their_ids_look_like():
    store = await MemoryMetadataStore.open()
    ids = [1, 11, 21, 110, 1000, 3]
    await write(store, "w2", 5, ids)
    for wanted in ({1}, {11}, {110}, {1, 21}, set(range(20))):  # the last: more than a scan tests bytes for
        found = await read_records(store, "w2", 0, wanted)
        assert set(found) == wanted & set(ids), wanted
        for lid, sections in found.items():
            assert [s.offset for s in sections] == [100 * ids.index(lid)] * 5
    assert await read_records(store, "w2", 0, {2}) == {}
    assert await read_records(store, "other", 0, {1}) == {}
