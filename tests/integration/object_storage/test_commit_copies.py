"""The ledgers a broker opens from the store (a takeover's recoveries, in
waves) are compacted into chunks from local copies of their commit objects
(storage/object/commit_copies.py), each object read by one GET for all of
them, instead of indexed: a lone cold read of an indexed ledger costs a GET
per section. Real etcd, real SeaweedFS, the opener's GETs counted."""
from __future__ import annotations

import os

import pytest

from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.store import ObjectNotFound
from magnetar.storage.object import compactions
from magnetar.storage.object.commit_copies import CommitCopies
from magnetar.storage.object.object_backend import ObjectBackend

from ...helpers import wait_until
from .test_close_compactions import closing_backend, sealed_ledgers
from .test_coalesced_reads import CountedStore
from .test_compaction_spill import entry, marker


def opener(tmp_path, store, objects, *, copies_max_bytes: int = 64 << 20) -> ObjectBackend:
    return ObjectBackend(store, objects, collect_interval_s=None, layout=3,
                         copies_dir=tmp_path / "copies", copies_max_bytes=copies_max_bytes)


async def dead_writers_ledgers(tmp_path, store, objects_url, monkeypatch, first_id: int, ledgers: int,
                               commits: int) -> list[int]:
    """Ledgers of small sections written together by a writer that is gone
    without compacting them (its compactions held back, then a close that
    does not wait: its session, its ``alive`` key, gone; nothing of them
    kept anywhere)."""
    with monkeypatch.context() as patch:
        patch.setattr(compactions, "COMPACT_AFTER_S", 600.0)
        writer = closing_backend(tmp_path / "writer", store, objects_url, close_compact_s=0)
        lids = await sealed_ledgers(writer, first_id, ledgers=ledgers, commits=commits)
        await writer.close()
    for lid in lids:
        assert await marker(store, lid) is None
    return lids


async def lone_read(store, objects_url, lid: int, entries: int) -> tuple[list[bytes], int]:
    """A fresh broker's read of the whole ledger, alone: its entries and its GETs."""
    counted = CountedStore(open_object_store(objects_url))
    reader = ObjectBackend(store, counted, collect_interval_s=None)
    try:
        handle = await reader.open_sealed(lid, entries)
        got: list[bytes] = []
        while len(got) < entries:  # a read stops at the end of a section
            got += await reader.read(handle, len(got), entries - 1, None)
        return got, counted.gets
    finally:
        await reader.close()


async def test_a_dead_writers_ledgers_opened_in_waves_are_chunked_with_one_get_per_commit_object(
        tmp_path, etcd_store, objects_url, monkeypatch):
    """12 ledgers written together over 10 commits, opened in three waves
    of 4 (a takeover loads topics in waves): every one is chunked, not
    indexed; the opener read each commit object once for all of them
    (where a lockstep per wave reads each three times); a lone read of one
    is then one GET, where its index cost one per section (10)."""
    lids = await dead_writers_ledgers(tmp_path, etcd_store, objects_url, monkeypatch, 1100, ledgers=12, commits=10)
    counted = CountedStore(open_object_store(objects_url))
    backend = opener(tmp_path, etcd_store, counted)
    try:
        objects: set[str] = set()
        for wave in range(3):
            handles = [await backend.open_sealed(lid, 10) for lid in lids[wave * 4:(wave + 1) * 4]]
            objects.update(key for h in handles for key in h.sections.keys)  # before their compaction
            await wait_until(lambda: all(h.compacted for h in handles), what=f"wave {wave} chunked", timeout=30)
        assert backend.compactions.compacted["copied"] == 12
        assert backend.compactions.compacted["indexed"] == 0
        assert 1 <= len(objects) <= 10 and all(key.startswith("data/") for key in objects)
        copies = backend.compactions.copies
        assert copies.gets == len(objects), f"{copies.gets} GETs of {len(objects)} commit objects"
        assert counted.gets == len(objects)
    finally:
        await backend.close()
    for lid in lids:
        doc = await marker(etcd_store, lid)
        assert doc is not None and "index" not in doc, f"ledger {lid}: {doc}"
    got, gets = await lone_read(etcd_store, objects_url, lids[5], 10)
    assert got == [entry(lids[5], k, 300) for k in range(10)]
    assert gets == 1


async def test_a_recovered_ledger_is_chunked_from_copies(tmp_path, etcd_store, objects_url, monkeypatch):
    """A takeover's path: fence, then recover (not open_sealed)."""
    lids = await dead_writers_ledgers(tmp_path, etcd_store, objects_url, monkeypatch, 1200, ledgers=3, commits=4)
    backend = opener(tmp_path, etcd_store, open_object_store(objects_url))
    try:
        for lid in lids:
            await backend.fence(lid)
        handles = [await backend.recover(lid) for lid in lids]
        await wait_until(lambda: all(h.compacted for h in handles), what="chunked", timeout=30)
        assert backend.compactions.compacted["copied"] == 3
        got = await backend.read(handles[1], 0, 3, None)
        assert got == [entry(lids[1], k, 300) for k in range(4)]
    finally:
        await backend.close()
    assert not os.path.exists(tmp_path / "copies"), "the copies outlived the close"


async def test_without_copies_they_are_indexed(tmp_path, etcd_store, objects_url, monkeypatch):
    """``copies_max_bytes = 0``: as before, an index object, and a lone read
    costs a GET per section (what the copies take away)."""
    lids = await dead_writers_ledgers(tmp_path, etcd_store, objects_url, monkeypatch, 1300, ledgers=3, commits=6)
    backend = opener(tmp_path, etcd_store, open_object_store(objects_url), copies_max_bytes=0)
    try:
        assert backend.compactions.copies is None
        handles = [await backend.open_sealed(lid, 6) for lid in lids]
        await wait_until(lambda: all(h.compacted for h in handles), what="indexed", timeout=30)
        assert backend.compactions.compacted["indexed"] == 3
    finally:
        await backend.close()
    assert "index" in await marker(etcd_store, lids[0])
    got, gets = await lone_read(etcd_store, objects_url, lids[0], 6)
    assert got == [entry(lids[0], k, 300) for k in range(6)]
    assert gets >= 6


async def test_copies_past_their_bound_are_read_again_and_every_entry_reads_back(tmp_path, etcd_store, objects_url,
                                                                                monkeypatch):
    """A bound smaller than the commit objects (segments of ~one object,
    the oldest deleted as new ones come): what is gone is copied again by
    the compaction that needs it; nothing is lost, only GETs."""
    lids = await dead_writers_ledgers(tmp_path, etcd_store, objects_url, monkeypatch, 1400, ledgers=6, commits=8)
    counted = CountedStore(open_object_store(objects_url))
    backend = opener(tmp_path, etcd_store, counted, copies_max_bytes=8 * 1024)  # ~4 of the 1.8 KB objects
    try:
        handles = [await backend.open_sealed(lid, 8) for lid in lids[:3]]
        await wait_until(lambda: all(h.compacted for h in handles), what="first wave chunked", timeout=30)
        handles = [await backend.open_sealed(lid, 8) for lid in lids[3:]]
        await wait_until(lambda: all(h.compacted for h in handles), what="second wave chunked", timeout=30)
        copies = backend.compactions.copies
        assert copies.bytes_on_disk <= 8 * 1024 + 2 * 1024
        assert copies.gets > 8, "nothing was copied again: the bound was not tried"
    finally:
        await backend.close()
    for lid in lids:
        got, _ = await lone_read(etcd_store, objects_url, lid, 8)
        assert got == [entry(lid, k, 300) for k in range(8)]


async def test_a_range_past_the_copied_start_of_an_object_is_a_ranged_get(tmp_path, objects):
    """Only an object's first ``copy_bytes`` are copied (a large commit
    object of one hot topic and many small ones): a range beyond is read by
    a GET of its own, and a failed GET fails the fetch, not the copies."""
    await objects.put("data/w/1-1", bytes(range(256)) * 64, if_absent=False)  # 16 KiB
    copies = CommitCopies(objects, tmp_path / "c", 1 << 20, copy_bytes=4096)
    try:
        got = await copies.fetch([("data/w/1-1", 10, 20), ("data/w/1-1", 8000, 8010), ("data/w/1-1", 4090, 4096)])
        whole = bytes(range(256)) * 64
        assert got == [whole[10:20], whole[8000:8010], whole[4090:4096]]
        assert copies.gets == 2 and copies.hits == 2
        with pytest.raises(ObjectNotFound):
            await copies.fetch([("data/w/none", 0, 5)])
        assert await copies.fetch([("data/w/1-1", 0, 3)]) == [whole[:3]]  # still here
        assert copies.gets == 3
    finally:
        copies.clear()


async def test_a_disk_that_fails_costs_gets_not_bytes(tmp_path, objects):
    """The copies' directory is unusable (here a file stands in its place):
    every fetch still returns the object's bytes, from the store."""
    await objects.put("data/w/1-2", b"0123456789" * 100, if_absent=False)
    where = tmp_path / "c"
    copies = CommitCopies(objects, where, 1 << 20)
    where.rmdir()
    where.write_bytes(b"not a directory")
    try:
        assert await copies.fetch([("data/w/1-2", 5, 15), ("data/w/1-2", 990, 1000)]) == [b"5678901234", b"0123456789"]
        assert "data/w/1-2" not in copies and copies.hits == 0
        assert await copies.fetch([("data/w/1-2", 0, 2)]) == [b"01"]
    finally:
        copies.clear()
