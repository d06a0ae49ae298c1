"""A writer compacts its own sealed ledger from the bytes it kept, with no
GET (issue 41: a lone latency topic's thousand GETs after every rollover
were its publish tail); a ledger fenced by a new owner meanwhile is
compacted from the index and the store as before. Real etcd, real
SeaweedFS, the store's GETs counted."""
from __future__ import annotations

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.object.index import compacted_key, read_sections
from magnetar.storage.object.object_backend import ObjectBackend
from tests.helpers import wait_until

from .test_coalesced_reads import CountedStore

APPENDS = 20


def _factory(tmp_path, store, objects) -> tuple[ManagedLedgerFactory, ObjectBackend]:
    backend = ObjectBackend(store, objects, profile="latency", collect_interval_s=None)
    return ManagedLedgerFactory(tmp_path / "unused", store, StorageConfig(), backend=backend), backend


async def _written(factory, name: str):
    ml = await factory.open(name)
    acked = [await ml.append(f"entry-{i}".encode() * 10) for i in range(APPENDS)]  # one commit each
    return ml, acked[0].ledger_id


async def test_a_sealed_ledger_is_compacted_from_the_bytes_its_writer_kept(tmp_path, etcd_store, objects_url):
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)
    ml, lid = await _written(factory, "t/kept")
    assert backend.kept.bytes > 0
    await ml.close()  # sealed: compacted in the background
    await wait_until(lambda: not backend._compacting, what="the compaction over")
    assert await etcd_store.get(compacted_key(lid)) is not None
    assert counted.gets == 0, f"{counted.gets} GETs for a ledger whose bytes its writer kept"
    assert backend.kept.bytes == 0
    chunks = await read_sections(etcd_store, lid, "c")
    reader, _ = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    handle = await reader.backend.open_sealed(lid, APPENDS)
    assert handle.compacted and handle.sections == chunks
    assert await reader.backend.read(handle, 0, APPENDS - 1, None) == [f"entry-{i}".encode() * 10
                                                                       for i in range(APPENDS)]
    await reader.close()
    await factory.close()


async def test_a_ledger_fenced_before_its_compaction_is_compacted_from_the_store(tmp_path, etcd_store,
                                                                                  objects_url, monkeypatch):
    from magnetar.storage.object import compactions

    monkeypatch.setattr(compactions, "COMPACT_AFTER_S", 0.5)  # room to fence between the seal and the compaction
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)
    ml, lid = await _written(factory, "t/fenced")
    await ml.close()  # sealed by its writer, its bytes kept
    assert backend._compacting
    other, _ = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    await other.backend.fence(lid)  # then a new owner: the record moves past the writer's epoch
    await wait_until(lambda: not backend._compacting, what="the compaction over")
    # The writer's kept bytes were not trusted: it read the index and the store.
    assert await etcd_store.get(compacted_key(lid)) is not None, "not compacted"
    assert counted.gets > 0
    await other.close()
    await factory.close()


async def test_a_ledger_taken_over_gives_up_the_bytes_its_writer_kept(tmp_path, etcd_store, objects_url):
    factory, backend = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    ml, lid = await _written(factory, "t/taken")
    assert backend.kept.bytes > 0
    other, _ = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    await other.backend.fence(lid)  # a new owner: the writer never seals it
    await ml.close()
    assert backend.kept.bytes == 0  # not held until the broker stops
    await other.close()
    await factory.close()
