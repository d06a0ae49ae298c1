"""Managed ledgers on object storage (ObjectBackend), against a real
SeaweedFS and a real etcd: append, read back, recover after a crash, a
takeover that fences the previous owner (no receipt for its commit), and
one PUT plus one transaction per commit whatever the number of topics."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, ManagedLedgerFencedError, StorageConfig, StorageError
from magnetar.storage.cache import CacheBudget
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.index import ROOT


def open_factory(tmp_path, store, objects_url, *, interval_ms=20, **config) -> ManagedLedgerFactory:
    """A factory on object storage (a broker's, less the broker); it owns
    its own object store client, as a broker does."""
    cfg = StorageConfig(**config)
    budget = CacheBudget(cfg.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), commit_interval_ms=interval_ms,
                            read_cache_bytes=cfg.read_cache_bytes, cache_budget=budget)
    return ManagedLedgerFactory(tmp_path / "unused", store, cfg, backend=backend, cache_budget=budget)


async def reads_back_elsewhere(tmp_path, etcd_store, objects_url, name: str, datas: list[bytes], acked: list) -> None:
    """Every entry of ``name`` reads back, at the positions acknowledged, from
    a factory that never wrote it (no cache: from the store)."""
    again = open_factory(tmp_path, etcd_store, objects_url, read_cache_bytes=0)
    ml = await again.open(name)
    entries = await ml.read_entries(ml.first_position(), 100)
    assert [e.data for e in entries] == datas
    assert [e.position for e in entries] == acked
    await again.close()

async def test_appends_read_back_from_objects_across_rollovers(tmp_path, etcd_store, objects_url, objects):
    factory = open_factory(tmp_path, etcd_store, objects_url, max_entries_per_ledger=50, read_cache_bytes=0)
    ml = await factory.open("t/a")
    positions = await asyncio.gather(*(ml.append(f"m{i}".encode()) for i in range(200)))
    assert len({p.ledger_id for p in positions}) >= 4  # rolled over: several ledgers
    entries = await ml.read_entries(ml.first_position(), 500)
    assert [e.data for e in entries] == [f"m{i}".encode() for i in range(200)]
    assert [e.position for e in entries] == positions
    # the bytes are in objects, not in any file of ours
    assert not (tmp_path / "unused" / "ledgers").exists() or not list((tmp_path / "unused" / "ledgers").iterdir())
    assert await objects.list("data/")
    await factory.close()


async def test_one_put_and_one_transaction_per_commit_for_many_topics(tmp_path, etcd_store, objects_url, objects):
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=200)
    ledgers = [await factory.open(f"t/many-{i}") for i in range(30)]
    committer = factory.backend.committer
    puts, txns = committer.puts, committer.transactions
    futures = [ml.append(b"x" * 100) for ml in ledgers for _ in range(3)]
    await asyncio.gather(*futures)
    assert committer.puts - puts == 1
    assert committer.transactions - txns == 1
    await factory.close()


async def test_a_restart_recovers_every_acknowledged_entry_and_cursor(tmp_path, etcd_server, prefix, objects_url, objects):
    store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    factory = open_factory(tmp_path, store, objects_url)
    ml = await factory.open("t/r")
    cursor = await ml.open_cursor("sub", "earliest")
    acked = [await ml.append(f"e{i}".encode()) for i in range(20)]
    await cursor.mark_delete(acked[4])
    factory.abandon()  # kill -9: nothing sealed, the open ledger's record says open
    await store.close()

    store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))  # a new broker, no local state
    again = open_factory(tmp_path / "elsewhere", store, objects_url)
    ml = await again.open("t/r")
    assert [e.data for e in await ml.read_entries(ml.first_position(), 100)] == [f"e{i}".encode() for i in range(20)]
    cursor = ml.cursors["sub"]
    assert cursor.mark_delete_position == acked[4]
    assert [e.data for e in await cursor.read_entries(100)] == [f"e{i}".encode() for i in range(5, 20)]
    pos = await ml.append(b"after")
    assert (await ml.read_entries(pos, 1))[0].data == b"after"
    await again.close()
    await store.close()


@pytest.mark.parametrize("hears_the_takeover", [True, False])
async def test_a_fenced_owner_gets_no_receipt_and_the_new_owner_reads_everything_acknowledged(
        tmp_path, etcd_server, prefix, objects_url, objects, hears_the_takeover):
    old_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    new_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    old = open_factory(tmp_path, old_store, objects_url, interval_ms=300)
    zombie = await old.open("t/z")
    acked = [await zombie.append(f"a{i}".encode()) for i in range(5)]
    if not hears_the_takeover:
        # A zombie (paused past its session, or cut from etcd's watch) does
        # not hear of the new owner: only its commit's compare stops it.
        zombie._record.stop_watching()
    refused = old.backend.committer.transactions
    # The zombie keeps appending (its commit gathers for 300 ms) while a new
    # owner takes the topic over: fence + recover through the metadata store.
    late = [zombie.append(f"late{i}".encode()) for i in range(5)]
    new = open_factory(tmp_path / "new", new_store, objects_url)
    owner = await new.open("t/z")
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results), results  # no receipt, whatever happened first
    if not hears_the_takeover:
        assert all(isinstance(r, ManagedLedgerFencedError) for r in results), results
        assert old.backend.committer.transactions > refused  # it tried to commit, and the compare refused
    with pytest.raises(Exception):
        await zombie.append(b"after-fence")
    # every receipt the zombie gave is readable by the new owner, and nothing else
    got = [e.data for e in await owner.read_entries(owner.first_position(), 100)]
    assert got == [f"a{i}".encode() for i in range(5)]
    assert [e.position for e in await owner.read_entries(owner.first_position(), 100)] == acked
    await owner.append(b"mine")
    old.abandon()
    await new.close()
    await old_store.close()
    await new_store.close()


async def test_catch_up_reads_use_ranged_gets_and_the_section_cache(tmp_path, etcd_store, objects_url, objects):
    factory = open_factory(tmp_path, etcd_store, objects_url, read_cache_bytes=0)
    ml = await factory.open("t/c")
    await asyncio.gather(*(ml.append(bytes([i]) * 1000) for i in range(100)))
    await ml.close()
    factory2 = open_factory(tmp_path, etcd_store, objects_url)
    ml = await factory2.open("t/c")
    cache = factory2.backend.cache
    first = ml.first_position()
    a = await ml.read_entries(first, 100)
    misses = cache.misses
    b = await ml.read_entries(first, 100)
    assert [e.data for e in a] == [e.data for e in b] == [bytes([i]) * 1000 for i in range(100)]
    assert cache.misses == misses and cache.hits > 0  # the second read fetched nothing
    assert cache.bytes <= 32 * 1024 * 1024 and factory2.cache_budget.bytes >= cache.bytes
    await factory2.close()
    await factory.close()


async def test_deleting_a_managed_ledger_deletes_its_index(tmp_path, etcd_store, objects_url, objects):
    factory = open_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/d")
    await asyncio.gather(*(ml.append(b"x") for _ in range(10)))
    ids = {info.ledger_id for info in ml.ledgers}
    await factory.delete("t/d")
    left = {int(n) for n in await etcd_store.children(ROOT)}
    assert not ids & left
    await factory.close()


async def wait_for_async(predicate, timeout=20.0, what="condition"):
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def test_sealed_ledgers_are_compacted_and_orphaned_objects_collected(tmp_path, etcd_store, objects_url, objects, monkeypatch):
    import magnetar.storage.object.object_ledger as object_ledger
    from magnetar.storage.object.compactor import collect_orphans
    from magnetar.storage.object.index import compacted_key

    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 10)  # roll over after 10 commits
    # Every ledger full at 10 exactly: the last one written (5 sections) is
    # the open one. Drawn sizes could fill it at the last append: sealed,
    # and compacted between the two passes below, whose second then rightly
    # collected its commit objects (1 in ~7 runs under load; that case:
    # test_a_ledger_sealed_by_the_last_append_is_collected_once_compacted).
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=5, read_cache_bytes=0)
    ml = await factory.open("t/k")
    acked = [await ml.append(f"k{i}".encode()) for i in range(35)]  # one commit each: one section each
    ledger_ids = sorted({p.ledger_id for p in acked})
    assert len(ledger_ids) == 4  # full after 10 sections: rolled over
    sealed = ledger_ids[:-1]

    async def all_compacted():
        return all([await etcd_store.get(compacted_key(lid)) is not None for lid in sealed])

    await wait_for_async(all_compacted, what="the sealed ledgers compacted")
    for lid in sealed:
        base = f"{ROOT}/{lid:020d}"
        assert await etcd_store.children(f"{base}/s") == []  # the per-commit records are gone
        assert len(await etcd_store.children(f"{base}/c")) == 1  # one chunk per ledger
    # Nothing names the sealed ledgers' commit objects now: collected, and
    # every entry still reads back, from a broker that never saw them.
    before = {o.key for o in await objects.list("data/")}
    gone = await collect_orphans(etcd_store, objects, older_than_s=0)
    assert gone and set(gone) <= before
    assert await collect_orphans(etcd_store, objects, older_than_s=0) == []
    await factory.close()
    await reads_back_elsewhere(tmp_path, etcd_store, objects_url, "t/k", [f"k{i}".encode() for i in range(35)], acked)


async def test_a_ledger_sealed_by_the_last_append_is_collected_once_compacted(tmp_path, etcd_store, objects_url,
                                                                                 objects, monkeypatch):
    """The last ledger written is sealed when the last append filled it. A
    collector pass before its compaction keeps its commit objects (its
    records name them); the pass after collects them, and every entry
    reads back from its chunks. The test above met this when the drawn
    size of its last ledger was the number of entries left (ledger 8 of
    6 sections: no marker at the first pass, a marker at the second)."""
    import magnetar.storage.object.object_ledger as object_ledger
    from magnetar.storage.object.compactor import collect_orphans, compact_ledger

    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 5)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger full at 5
    sealed: dict[int, object] = {}
    monkeypatch.setattr(ObjectBackend, "_compact_later", lambda self, ledger: sealed.__setitem__(ledger.ledger_id, ledger))
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=5, read_cache_bytes=0)
    ml = await factory.open("t/last")
    acked = [await ml.append(f"f{i}".encode()) for i in range(10)]
    first, last = sorted({p.ledger_id for p in acked})

    async def both_sealed():
        return first in sealed and last in sealed

    await wait_for_async(both_sealed, what="both ledgers sealed (the last by the last append)")
    assert await compact_ledger(etcd_store, objects, first, list(sealed[first].sections))
    last_objects = {s.key for s in sealed[last].sections}
    gone = await collect_orphans(etcd_store, objects, older_than_s=0)
    assert gone and not last_objects & set(gone)  # the first ledger's objects only
    assert await compact_ledger(etcd_store, objects, last, list(sealed[last].sections))
    assert set(await collect_orphans(etcd_store, objects, older_than_s=0)) == last_objects
    assert await collect_orphans(etcd_store, objects, older_than_s=0) == []
    await factory.close()
    await reads_back_elsewhere(tmp_path, etcd_store, objects_url, "t/last", [f"f{i}".encode() for i in range(10)],
                               acked)


async def test_section_records_a_compaction_left_after_its_marker_are_collected(tmp_path, etcd_store, objects_url,
                                                                                 objects, monkeypatch):
    """A compaction that stopped between its marker and the deletes of the
    ``s/`` records (a crash) left them for good: etcd kept a ledger's worth
    of records that nothing reads. The collector deletes them, and then the
    commit objects only they named."""
    import magnetar.storage.object.object_ledger as object_ledger
    from magnetar.metadata.store import Put
    from magnetar.storage.object.compactor import collect_orphans
    from magnetar.storage.object.index import Section, section_key

    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 5)
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=5, read_cache_bytes=0)
    ml = await factory.open("t/left")
    acked = [await ml.append(f"l{i}".encode()) for i in range(8)]
    sealed = acked[0].ledger_id
    base = f"{ROOT}/{sealed:020d}/s"

    async def compaction_ended() -> bool:  # the marker, then the deletes of the ``s/`` records
        return await _compacted(etcd_store, sealed) and not await etcd_store.children(base)

    await wait_for_async(compaction_ended, what="the sealed ledger compacted, its section records deleted")
    # What a crash right after the marker leaves: the section records, as committed.
    leftover = Section(0, 1, "data/gone/0000000000000-00000001", 0, 10)
    await etcd_store.transaction([], [Put(section_key(sealed, 0), leftover.encode())])
    assert len(await etcd_store.children(base)) == 1
    await collect_orphans(etcd_store, objects)
    assert await etcd_store.children(base) == []
    entries = await ml.read_entries(ml.first_position(), 100)
    assert [e.data for e in entries] == [f"l{i}".encode() for i in range(8)]
    await factory.close()


async def test_a_ledger_compacted_elsewhere_after_this_broker_loaded_its_index_still_reads(
        tmp_path, etcd_store, objects_url, objects, monkeypatch):
    """Broker B loads a sealed ledger's index while its previous owner is
    still compacting it; the compaction ends, and the collector deletes the
    commit objects that only the old section records named. B's reads then
    met missing objects and failed as a corrupt ledger; B now reads the index
    again and finds the entries in the chunks."""
    import magnetar.storage.object.object_ledger as object_ledger
    from magnetar.storage.object.compactor import collect_orphans, compact_ledger

    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 4)
    monkeypatch.setattr(ObjectBackend, "_compact_later", lambda self, ledger: None)  # compaction by hand below
    writer = open_factory(tmp_path / "a", etcd_store, objects_url, interval_ms=5, read_cache_bytes=0)
    ml = await writer.open("t/elsewhere")
    acked = [await ml.append(f"e{i}".encode()) for i in range(6)]
    sealed = acked[0].ledger_id
    count = sum(1 for p in acked if p.ledger_id == sealed)
    assert acked[-1].ledger_id != sealed  # rolled over: the first ledger is sealed

    reader = open_factory(tmp_path / "b", etcd_store, objects_url, read_cache_bytes=0)
    handle = await reader.backend.open_sealed(sealed, count)  # B's index: the per-commit sections
    assert not handle.compacted
    assert await compact_ledger(etcd_store, objects, sealed, list(handle.sections))  # A, meanwhile
    assert await collect_orphans(etcd_store, objects, older_than_s=0)  # the commit objects go
    data = await reader.backend.read(handle, 0, count - 1, None)
    assert data == [f"e{i}".encode() for i in range(count)] and handle.compacted
    await reader.close()
    await writer.close()


async def _compacted(store, ledger_id: int) -> bool:
    from magnetar.storage.object.index import compacted_key
    return await store.get(compacted_key(ledger_id)) is not None


async def test_a_young_orphan_is_left_alone(tmp_path, etcd_store, objects_url, objects):
    from magnetar.storage.object.compactor import collect_orphans

    await objects.put("data/zombie/%013d-00000001" % 0, b"old orphan")
    import time
    await objects.put("data/zombie/%013d-00000002" % int(time.time() * 1000), b"young, maybe mid-commit")
    gone = await collect_orphans(etcd_store, objects)
    assert gone == ["data/zombie/%013d-00000001" % 0]


async def test_chunks_of_a_deleted_ledger_that_its_index_never_named_are_collected(tmp_path, etcd_store, objects_url,
                                                                                   objects):
    from magnetar.storage.object.compactor import collect_orphans
    from magnetar.storage.object.index import chunk_object

    factory = open_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/chunks")
    live = (await ml.append(b"x")).ledger_id
    gone_id = live + 1000  # never created, or deleted: ids are never reused
    # what a compaction leaves when its ledger is deleted before it records its chunks
    await objects.put(chunk_object(gone_id, 0), b"orphan chunk")
    await objects.put(chunk_object(live, 0), b"a compaction under way")
    gone = await collect_orphans(etcd_store, objects)
    assert gone == [chunk_object(gone_id, 0)]  # before: chunk objects were never collected
    assert [o.key for o in await objects.list("ledgers/")] == [chunk_object(live, 0)]
    await factory.close()
