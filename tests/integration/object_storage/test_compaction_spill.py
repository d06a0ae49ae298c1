"""A writer keeps its commit objects on local disk (storage/object/spilled_sections.py),
so every ledger it seals whole is compacted into chunks from them: no GET,
no index object, however many ledgers it writes (the 16 MiB in memory kept
almost none at 10,000 topics, so they were indexed and a lone cold read
cost a GET per entry). A spill damaged or past its byte bound falls back
to the store (indexed, or a round's GETs) and every entry still reads back.
Real etcd, real SeaweedFS, the writer's GETs counted."""
from __future__ import annotations

import asyncio
import json
import os

import pytest

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.index import compacted_key
from magnetar.storage.object.kept_sections import KEEP_BYTES
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.spilled_sections import SpilledSections

from ...helpers import wait_until
from .test_coalesced_reads import CountedStore


def backend_on(tmp_path, store, objects, *, spill_max_bytes: int = 256 * 1024 * 1024, layout: int = 3):
    return ObjectBackend(store, objects, commit_interval_ms=1, collect_interval_s=None, profile="latency",
                         layout=layout, spill_dir=tmp_path / "spill", spill_max_bytes=spill_max_bytes)


async def append_together(backend, ledgers, data_of) -> None:
    """One entry to each of ``ledgers`` at once (their sections share commit objects)."""
    loop = asyncio.get_running_loop()
    dones = []
    for ml in ledgers:
        done = loop.create_future()
        backend.submit(ml, [data_of(ml.ledger_id)], done.set_result, loop)
        dones.append(done)
    assert await asyncio.gather(*dones) == [None] * len(ledgers)


def entry(lid: int, k: int, size: int) -> bytes:
    head = f"{lid}-{k}-".encode()
    return head + bytes((lid + k + i) % 251 for i in range(size - len(head)))


async def compactions_over(backend) -> None:
    await wait_until(lambda: not backend._compacting and not len(backend.rounds), what="compactions over")


async def marker(store, lid: int) -> dict | None:
    found = await store.get(compacted_key(lid))
    return None if found is None else json.loads(found.value)


async def reads_back(tmp_path, store, objects_url, lid: int, expected: list[bytes]) -> None:
    """A fresh backend (another broker, nothing kept) reads every entry of the sealed ledger."""
    reader = ObjectBackend(store, open_object_store(objects_url), collect_interval_s=None)
    try:
        handle = await reader.open_sealed(lid, len(expected))
        got: list[bytes] = []
        while len(got) < len(expected):  # a read stops at the end of a section
            got += await reader.read(handle, len(got), len(expected) - 1, None)
        assert got == expected
    finally:
        await reader.close()


async def test_ledgers_beyond_the_memory_budget_are_compacted_into_chunks_from_the_spill(
        tmp_path, etcd_store, objects_url, objects):
    """20 ledgers written together, 18 MiB in all (more than the 16 MiB the
    memory keeper holds: some would be indexed), sections of 18 KiB (small:
    indexed if not kept): every one is chunked from the spill, no GET."""
    counted = CountedStore(open_object_store(objects_url))
    backend = backend_on(tmp_path, etcd_store, counted)
    assert isinstance(backend.kept, SpilledSections)
    ledgers = [await backend.create(300 + i) for i in range(20)]
    commits, size = 50, 18 * 1024
    for k in range(commits):
        await append_together(backend, ledgers, lambda lid: entry(lid, k, size))
    assert backend.kept.bytes > KEEP_BYTES  # more than memory would have kept
    await asyncio.gather(*(backend.seal(ml) for ml in ledgers))
    await compactions_over(backend)
    assert counted.gets == 0, f"{counted.gets} GETs: the spill should have served every compaction"
    assert backend.kept.taken == 20 and backend.kept.missed == 0
    chunk_objects = [o.key for o in await objects.list("ledgers/")]
    for ml in ledgers:
        doc = await marker(etcd_store, ml.ledger_id)
        assert doc is not None and "index" not in doc, f"ledger {ml.ledger_id}: {doc}"
        assert any(key.startswith(f"ledgers/{ml.ledger_id:020d}/") for key in chunk_objects)
    assert not [key for key in chunk_objects if key.endswith("/index")]
    # Their chunk records and markers went in shared transactions (one each: 20).
    markers = backend.compactions.markers
    assert markers.markers == 20 and markers.transactions <= 5, (markers.markers, markers.transactions)
    for ml in ledgers[:3]:
        await reads_back(tmp_path, etcd_store, objects_url, ml.ledger_id,
                         [entry(ml.ledger_id, k, size) for k in range(commits)])
    await backend.close()


@pytest.mark.parametrize("damage", ["flip", "truncate"])
async def test_a_damaged_spill_falls_back_to_the_store_and_every_entry_reads(
        tmp_path, etcd_store, objects_url, objects, damage):
    """Layout 2 (no index objects): the fallback is a round's GETs, into chunks."""
    counted = CountedStore(open_object_store(objects_url))
    backend = backend_on(tmp_path, etcd_store, counted, layout=2)
    ledgers = [await backend.create(400), await backend.create(401)]
    commits, size = 12, 300
    for k in range(commits):
        await append_together(backend, ledgers, lambda lid: entry(lid, k, size))
    [segment] = sorted((tmp_path / "spill").iterdir())
    length = segment.stat().st_size
    with open(segment, "r+b") as f:
        if damage == "flip":
            f.seek(length // 2)  # inside some entry of a section of each ledger's commit there
            byte = f.read(1)
            f.seek(length // 2)
            f.write(bytes([byte[0] ^ 0x40]))
        else:
            f.truncate(length - 100)  # the last commit object's sections are short
    await asyncio.gather(*(backend.seal(ml) for ml in ledgers))
    await compactions_over(backend)
    assert backend.kept.missed >= 1, "the damage went unseen"
    assert counted.gets > 0  # the damaged ledger's bytes came from the store
    for ml in ledgers:
        doc = await marker(etcd_store, ml.ledger_id)
        assert doc is not None and "index" not in doc
        await reads_back(tmp_path, etcd_store, objects_url, ml.ledger_id,
                         [entry(ml.ledger_id, k, size) for k in range(commits)])
    await backend.close()


async def test_a_segment_deleted_past_the_byte_bound_falls_back_to_an_index_object(
        tmp_path, etcd_store, objects_url, objects):
    """A bound of 64 KiB (16 KiB segments): the first ledger's early commits
    are gone by its seal; it is indexed (small sections), no GET, and reads
    back; the ledger written last, all of it still spilled, is chunked."""
    counted = CountedStore(open_object_store(objects_url))
    bound = 64 * 1024
    backend = backend_on(tmp_path, etcd_store, counted, spill_max_bytes=bound)
    early = await backend.create(500)
    size = 1000
    for k in range(20):  # ~20 KB: past a segment
        await append_together(backend, [early], lambda lid: entry(lid, k, size))
    late = await backend.create(501)
    for k in range(50):  # ~50 KB more: the first segment (the early ledger's alone) goes
        await append_together(backend, [late], lambda lid: entry(lid, k, size))
    spilled = sum(p.stat().st_size for p in (tmp_path / "spill").iterdir())
    assert spilled <= bound and backend.kept.bytes == spilled
    assert not (tmp_path / "spill" / "00000000.spill").exists()
    await backend.seal(early)
    await backend.seal(late)
    await compactions_over(backend)
    assert counted.gets == 0
    assert backend.kept.missed == 1 and backend.kept.taken == 1
    assert "index" in (await marker(etcd_store, early.ledger_id))
    assert "index" not in (await marker(etcd_store, late.ledger_id))  # chunked from the spill
    await reads_back(tmp_path, etcd_store, objects_url, early.ledger_id, [entry(500, k, size) for k in range(20)])
    await backend.close()


async def test_the_spill_is_emptied_at_start_and_a_bound_of_0_keeps_bytes_in_memory(tmp_path, etcd_store, objects):
    (tmp_path / "spill").mkdir()
    (tmp_path / "spill" / "00000007.spill").write_bytes(b"a previous life's")
    backend = backend_on(tmp_path, etcd_store, objects)
    assert list((tmp_path / "spill").iterdir()) == []
    await backend.close()
    memory = backend_on(tmp_path, etcd_store, objects, spill_max_bytes=0)
    assert not isinstance(memory.kept, SpilledSections)
    await memory.close()
    assert os.path.isdir(tmp_path / "spill")


async def test_only_a_few_compactions_hold_their_kept_bytes_at_once(tmp_path, etcd_store, objects_url, objects,
                                                                     monkeypatch):
    """A compaction waits for the PUT budget with its ledger's bytes in
    hand; at 10,000 topics hundreds waited at once and the broker's heap
    grew by about 2 GB in the seal phase. Now the others wait before they
    read their bytes, and every ledger is still chunked from the spill."""
    from magnetar.storage.object import compactions

    monkeypatch.setattr(compactions, "KEPT_AT_ONCE", 4)
    holding, most = 0, 0
    real = compactions.Compactions._compact_now

    async def counted(self, *args):
        nonlocal holding, most
        holding += 1
        most = max(most, holding)
        try:
            await asyncio.sleep(0.02)  # as if waiting for the budget
            return await real(self, *args)
        finally:
            holding -= 1

    monkeypatch.setattr(compactions.Compactions, "_compact_now", counted)
    backend = backend_on(tmp_path, etcd_store, open_object_store(objects_url))
    ledgers = [await backend.create(500 + i) for i in range(20)]
    for k in range(5):
        await append_together(backend, ledgers, lambda lid: entry(lid, k, 1024))
    await asyncio.gather(*(backend.seal(ml) for ml in ledgers))
    await compactions_over(backend)
    assert most == 4, f"{most} compactions held their bytes at once"
    assert backend.kept.taken == 20 and backend.kept.missed == 0
    for ml in ledgers:
        doc = await marker(etcd_store, ml.ledger_id)
        assert doc is not None and "index" not in doc, f"ledger {ml.ledger_id}: {doc}"
    await reads_back(tmp_path, etcd_store, objects_url, ledgers[0].ledger_id,
                     [entry(ledgers[0].ledger_id, k, 1024) for k in range(5)])
    await backend.close()
