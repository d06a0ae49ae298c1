"""A backfill of indexed ledgers (layout 3: one small section per commit
object, :mod:`magnetar.storage.object.ledger_index`) fetches each commit
object once for all the ledgers it reads, even when its readers drift
apart (real etcd, real SeaweedFS; the store's GETs counted).

Without the readers' windows (:mod:`magnetar.storage.object.read_windows`)
a reader behind the others finds the objects they fetched gone from the
kept bytes (least recently used first out) and fetches them again: here
~170 GETs for 60 commit objects, one per object per reader past the first
one's read-ahead.
"""
from __future__ import annotations

import asyncio

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.index import compacted_key

from ...helpers import wait_until
from .test_coalesced_reads import CountedStore
from .test_indexed_compaction import append, backend_on, read_all

READERS, COMMITS = 6, 60


def entry(lid: int, k: int) -> bytes:
    return f"{lid}-{k}-".encode() * 10


async def write_indexed(etcd_store, objects_url) -> list[int]:
    """READERS ledgers written together (a section of each in each of the
    COMMITS commit objects), sealed and compacted into index objects."""
    writer = backend_on(etcd_store, open_object_store(objects_url))
    try:
        ledgers = [await writer.create(200 + i) for i in range(READERS)]
        for k in range(COMMITS):
            await asyncio.gather(*(append(writer, ml, entry(ml.ledger_id, k)) for ml in ledgers))
        assert writer.committer.puts == COMMITS
        for ml in ledgers:
            await writer.seal(ml)
        for ml in ledgers:
            await wait_until(lambda lid=ml.ledger_id: etcd_store.exists(compacted_key(lid)), what="indexed",
                             timeout=30)
        return [ml.ledger_id for ml in ledgers]
    finally:
        await writer.close()


async def test_readers_drifting_apart_fetch_each_commit_object_once(etcd_store, objects_url, objects):
    lids = await write_indexed(etcd_store, objects_url)
    counted = CountedStore(open_object_store(objects_url))
    reader = backend_on(etcd_store, counted)  # a new owner: nothing cached
    # Room for 3 commit objects' bytes: the drift of 1,000 topics' readers over 32 MiB, in small.
    reader.gets.keep_bytes = 3 * (await objects.list("data/"))[0].size
    try:
        mls = [await reader.open_sealed(lid, COMMITS) for lid in lids]
        assert all(ml.compacted and len(ml.sections) == COMMITS for ml in mls)  # read from the index objects
        assert counted.gets == READERS  # the index objects
        counted.gets = 0
        # The backfill begins together: each reader's first read reads ahead ...
        first = await asyncio.gather(*(reader.read(ml, 0, COMMITS - 1, None) for ml in mls))
        assert [got for got in first] == [[entry(lid, 0)] for lid in lids]
        # ... then they drift apart: each reads to the end before the next goes on.
        for ml in mls:
            assert await read_all(reader, ml) == [entry(ml.ledger_id, k) for k in range(COMMITS)]
        assert counted.gets == COMMITS, f"{counted.gets} GETs for {COMMITS} commit objects"
        # Read: nothing pinned for them any more (their kept bytes may go).
        assert not [info.key for info in await objects.list("data/") if info.key in reader.windows]
    finally:
        await reader.close()
