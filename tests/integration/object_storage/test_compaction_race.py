"""A new owner opening a sealed ledger while the old owner compacts it
(a PIP-307 move seals the ledger, then compacts it at once) reads every
entry: the sections, or the chunks, never a half-deleted index. Real etcd
and real SeaweedFS."""
from __future__ import annotations

import asyncio

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.index import compacted_key, ledger_key

LEDGERS = 8
COMMITS = 6


async def _append(backend: ObjectBackend, ledger, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    backend.submit(ledger, [data], lambda error: done.set_result(error), loop)
    assert await done is None


async def test_a_sealed_ledger_opened_while_it_is_compacted_reads_every_entry(etcd_store, objects_url):
    writer = ObjectBackend(etcd_store, open_object_store(objects_url), commit_interval_ms=1, collect_interval_s=None)
    reader = ObjectBackend(etcd_store, open_object_store(objects_url), collect_interval_s=None)
    opened = 0
    try:
        for i in range(LEDGERS):
            lid = 7_000 + i
            ledger = await writer.create(lid)
            for k in range(COMMITS):  # one commit each: one section each
                await _append(writer, ledger, f"{lid}-{k}".encode())
            entries, _ = await writer.seal(ledger)  # compaction starts now, in the background
            assert entries == COMMITS
            while True:  # the new owner opens it over and over while the compaction runs
                done = await etcd_store.get(compacted_key(lid)) is not None and not await etcd_store.children(
                    ledger_key(lid) + "/s")
                found = await reader.open_sealed(lid, entries)  # before: "its index holds 0" mid-compaction
                got: list[bytes] = []
                while len(got) < entries:  # a read stops at the end of a section
                    got += await reader.read(found, len(got), entries - 1, None)
                assert got == [f"{lid}-{k}".encode() for k in range(COMMITS)]
                opened += 1
                if done:
                    break
        assert opened > LEDGERS  # the opens overlapped the compactions
    finally:
        await writer.close()
        await reader.close()


async def test_a_compaction_from_a_stale_index_changes_nothing(etcd_store, objects_url):
    """An owner paused past its session recovers from the index it read
    before (fewer entries than the new owner recovered) and compacts that:
    the 1,000-fault soak lost 211 entries of a ledger when that compaction
    replaced the new owner's ("metadata says 298 entries, its index holds 87").
    A compaction works only from the index as it is, and never after another."""
    from magnetar.storage.object.compactor import compact_ledger

    objects = open_object_store(objects_url)
    writer = ObjectBackend(etcd_store, objects, commit_interval_ms=1, collect_interval_s=None)
    reader = ObjectBackend(etcd_store, open_object_store(objects_url), collect_interval_s=None)
    try:
        lid = 7_100
        ledger = await writer.create(lid)
        for k in range(COMMITS):
            await _append(writer, ledger, f"e{k}".encode())
        stale = list(ledger.sections[:2])  # what the paused owner had read: two of six
        # Before anyone compacted: the stale list is refused (it is not the index now).
        assert await compact_ledger(etcd_store, objects, lid, stale) == []
        assert await etcd_store.get(compacted_key(lid)) is None
        entries, _ = await writer.seal(ledger)
        while await etcd_store.get(compacted_key(lid)) is None:  # the writer's own compaction, in the background
            await asyncio.sleep(0.01)
        # After the new owner compacted everything: the stale one changes nothing.
        assert await compact_ledger(etcd_store, objects, lid, stale) == []
        found = await reader.open_sealed(lid, entries)
        got: list[bytes] = []
        while len(got) < entries:
            got += await reader.read(found, len(got), entries - 1, None)
        assert got == [f"e{k}".encode() for k in range(COMMITS)]
    finally:
        await writer.close()
        await reader.close()
