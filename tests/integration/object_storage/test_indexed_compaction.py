"""Compaction that moves no data (layout 3, :mod:`magnetar.storage.object.ledger_index`):
a sealed ledger of small sections compacted from the store gets its section
list as one index object and a marker naming it; its entries stay in the
commit objects, which the collector keeps while an indexed ledger spans
them. Real etcd and real SeaweedFS; two backends on one place are two brokers.
Each test fails without the feature: a GET of commit objects by the
compaction, commit objects collected under a ledger that still names them,
an unreadable ledger after a crash before the marker, a marker written
over a fence or a deletion, a data set an older broker would misread."""
from __future__ import annotations

import asyncio
import json

import pytest

from magnetar import formats
from magnetar.formats import NewerFormatError, check_data_set
from magnetar.objectstore.s3 import open_object_store
from magnetar.objectstore.store import ObjectStoreError
from magnetar.storage.errors import CorruptLedgerError
from magnetar.storage.object.commit_records import COMMITS, decode_record
from magnetar.storage.object.compactor import collect_orphans
from magnetar.storage.object.index import compacted_key, ledger_key
from magnetar.storage.object.ledger_index import decode_index, encode_index, index_object
from magnetar.storage.object.object_backend import ObjectBackend

from ...helpers import wait_until
from .test_coalesced_reads import CountedStore, objects_listed

LEDGERS, COMMITS_EACH = 3, 6


def backend_on(store, objects, **kw) -> ObjectBackend:
    kw.setdefault("layout", 3)
    backend = ObjectBackend(store, objects, commit_interval_ms=1, collect_interval_s=None, profile="latency", **kw)
    backend.kept.max_bytes = 0  # no bytes kept: compacted from the store, as most ledgers at 10,000 topics
    return backend


async def append(backend, ledger, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    backend.submit(ledger, [data], done.set_result, loop)
    assert await done is None


def entry(lid: int, k: int) -> bytes:
    return f"{lid}-{k}".encode() * 20


async def write_ledgers(backend, first_id: int = 100) -> list:
    """LEDGERS ledgers written together (their sections share commit objects), not sealed."""
    ledgers = [await backend.create(first_id + i) for i in range(LEDGERS)]
    for k in range(COMMITS_EACH):
        await asyncio.gather(*(append(backend, ml, entry(ml.ledger_id, k)) for ml in ledgers))
    return ledgers


async def read_all(backend, ledger) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < ledger.entry_count:  # a read stops at the end of a section
        got += await backend.read(ledger, len(got), ledger.entry_count - 1, None)
    return got


async def records_naming(store, lids: set[int]) -> int:
    found = 0
    for writer in await store.children(COMMITS):
        for name in await store.children(f"{COMMITS}/{writer}"):
            record = await store.get(f"{COMMITS}/{writer}/{name}")
            if record is not None:
                found += sum(1 for lid, _ in decode_record(record.value)[1] if lid in lids)
    return found


async def test_a_sealed_ledger_of_small_sections_gets_an_index_object_and_its_commit_objects_stay(
        etcd_store, objects_url, objects):
    counted = CountedStore(open_object_store(objects_url))
    writer = backend_on(etcd_store, counted)
    try:
        ledgers = await write_ledgers(writer)
        listed = sorted(info.key for info in await objects.list("data/"))
        assert len(listed) >= COMMITS_EACH
        for ml in ledgers:
            await writer.seal(ml)
        lids = [ml.ledger_id for ml in ledgers]
        for lid in lids:
            await wait_until(lambda lid=lid: etcd_store.exists(compacted_key(lid)), what="compacted", timeout=30)
        await wait_until(lambda: not writer._compacting, what="compactions over")
        assert counted.gets == 0 and writer.gets.gets == 0  # no commit object read: no data moved
        assert sorted(info.key for info in await objects.list("ledgers/")) == sorted(index_object(i) for i in lids)
        for lid in lids:
            marker = json.loads((await etcd_store.get(compacted_key(lid))).value)
            assert marker["entries"] == COMMITS_EACH and marker["index"] == index_object(lid)
            assert marker["spans"] == [[listed[0], listed[-1]]]
            assert not await etcd_store.children(f"{ledger_key(lid)}/c")  # no chunk records
        assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 3
    finally:
        await writer.close()
    assert await records_naming(etcd_store, set(lids)) > 0
    # The collector releases their commit records; the commit objects they span stay (without the span rule,
    # every one of them is collected here: nothing else names them).
    await collect_orphans(etcd_store, objects, older_than_s=0)
    assert await records_naming(etcd_store, set(lids)) == 0
    assert sorted(info.key for info in await objects.list("data/")) == listed
    # A fresh broker reads them back from the index objects and the commit objects.
    reader = backend_on(etcd_store, open_object_store(objects_url))
    try:
        for lid in lids:
            ml = await reader.open_sealed(lid, COMMITS_EACH)
            assert ml.compacted and len(ml.sections) == COMMITS_EACH
            assert await read_all(reader, ml) == [entry(lid, k) for k in range(COMMITS_EACH)]
        # Deleting two of them: the third still spans every commit object, so all stay.
        for lid in lids[:2]:
            await reader.delete(lid)
        await collect_orphans(etcd_store, objects, older_than_s=0)
        assert sorted(info.key for info in await objects.list("data/")) == listed
        assert [info.key for info in await objects.list("ledgers/")] == [index_object(lids[2])]
        await reader.delete(lids[2])
        await collect_orphans(etcd_store, objects, older_than_s=0)
        assert await objects.list("data/") == [] and await objects.list("ledgers/") == []
    finally:
        await reader.close()


class FailingPut:
    """The real object store; ``before_index`` runs before the index object's
    PUT, ``after_index`` after it (raising there: a crash once the object is stored)."""

    def __init__(self, inner, before_index=None, after_index=None) -> None:
        self.inner, self.before_index, self.after_index = inner, before_index, after_index

    async def put(self, key, data, **kw):
        if key.endswith("/index") and self.before_index is not None:
            await self.before_index()
        await self.inner.put(key, data, **kw)
        if key.endswith("/index") and self.after_index is not None:
            await self.after_index()

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def test_a_crash_between_the_index_object_and_the_marker_leaves_a_readable_ledger(
        etcd_store, objects_url, objects):
    async def crash():
        raise ObjectStoreError("the broker died here")
    writer = backend_on(etcd_store, FailingPut(open_object_store(objects_url), after_index=crash))
    try:
        ledgers = await write_ledgers(writer)
        for ml in ledgers:
            await writer.seal(ml)
        await wait_until(objects_listed(objects, "ledgers/", LEDGERS), what="the index objects written", timeout=30)
        await wait_until(lambda: not writer._compacting and not len(writer.rounds), what="compactions tried")
    finally:
        await writer.close()
    lids = [ml.ledger_id for ml in ledgers]
    assert len(await objects.list("ledgers/")) == LEDGERS  # the index objects are there ...
    assert not [lid for lid in lids if await etcd_store.exists(compacted_key(lid))]  # ... and no marker
    await collect_orphans(etcd_store, objects, older_than_s=0)  # the commit records still name the objects
    reader = backend_on(etcd_store, open_object_store(objects_url))
    try:
        for lid in lids:
            ml = await reader.open_sealed(lid, COMMITS_EACH)  # from the commit records; compacted again
            assert await read_all(reader, ml) == [entry(lid, k) for k in range(COMMITS_EACH)]
        for lid in lids:
            await wait_until(lambda lid=lid: etcd_store.exists(compacted_key(lid)), what="compacted", timeout=30)
    finally:
        await reader.close()
    await collect_orphans(etcd_store, objects, older_than_s=0)
    reader = backend_on(etcd_store, open_object_store(objects_url))
    try:
        for lid in lids:
            ml = await reader.open_sealed(lid, COMMITS_EACH)
            assert ml.compacted and await read_all(reader, ml) == [entry(lid, k) for k in range(COMMITS_EACH)]
    finally:
        await reader.close()


@pytest.mark.parametrize("meanwhile", ["fenced", "deleted"])
async def test_a_ledger_fenced_or_deleted_while_its_index_object_is_written_is_left_alone(
        etcd_store, objects_url, objects, meanwhile):
    other = backend_on(etcd_store, open_object_store(objects_url))
    target: list[int] = []

    async def interfere():
        if meanwhile == "fenced":
            await other.fence(target[0])
        else:
            await other.delete(target[0])
    writer = backend_on(etcd_store, FailingPut(open_object_store(objects_url), before_index=interfere))
    try:
        ml = await writer.create(100)
        target.append(ml.ledger_id)
        for k in range(COMMITS_EACH):
            await append(writer, ml, entry(100, k))
        await writer.seal(ml)
        await wait_until(lambda: objects.list("ledgers/"), what="the index object written", timeout=30)
        await wait_until(lambda: not writer._compacting and not len(writer.rounds), what="compaction over")
        assert not await etcd_store.exists(compacted_key(100))  # the marker compared the record, and failed
        if meanwhile == "fenced":
            found = await other.recover(100)  # the new owner's own compaction goes on as usual
            assert await read_all(other, found) == [entry(100, k) for k in range(COMMITS_EACH)]
            await wait_until(lambda: etcd_store.exists(compacted_key(100)), what="compacted by the new owner",
                             timeout=30)
        else:
            assert not await etcd_store.exists(ledger_key(100))
            gone = await collect_orphans(etcd_store, objects, older_than_s=0)
            assert index_object(100) in gone  # no record: its index object is collected
    finally:
        await writer.close()
        await other.close()


async def test_a_broker_that_knows_only_chunks_refuses_the_data_set_once_an_index_object_is_written(
        etcd_store, objects_url, monkeypatch):
    await check_data_set(etcd_store)
    writer = backend_on(etcd_store, open_object_store(objects_url))
    try:
        ml = await writer.create(100)
        await append(writer, ml, b"x")
        assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 2
        await writer.seal(ml)
        await wait_until(lambda: etcd_store.exists(compacted_key(100)), what="compacted", timeout=30)
    finally:
        await writer.close()
    assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 3
    monkeypatch.setitem(formats.KINDS, "object_layout", 2)  # what the code before index objects reads
    with pytest.raises(NewerFormatError, match="object layout .* is in format 3, newer than this Magnetar") as caught:
        await check_data_set(etcd_store)
    assert "\n" not in str(caught.value)


async def test_layout_2_keeps_chunk_compaction(etcd_store, objects_url, objects):
    writer = backend_on(etcd_store, open_object_store(objects_url), layout=2)
    try:
        ml = await writer.create(100)
        await append(writer, ml, b"x")
        await writer.seal(ml)
        await wait_until(lambda: etcd_store.exists(compacted_key(100)), what="compacted", timeout=30)
    finally:
        await writer.close()
    assert [info.key for info in await objects.list("ledgers/")] == ["ledgers/00000000000000000100/000000000000"]
    assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 2


def test_an_index_object_of_another_version_or_damaged_is_refused_with_its_key():
    from magnetar.storage.object.index import new_section
    sections = [new_section(0, 2, "data/s1/0000000000001-00000001", 10, 50),
                new_section(2, 1, "data/s1/0000000000002-00000002", 0, 20)]
    blob = encode_index(sections)
    assert decode_index("k", blob) == sections
    with pytest.raises(CorruptLedgerError, match="ledger index object k is format 2; this Magnetar reads format 1"):
        decode_index("k", b"\x02" + blob[1:])
    with pytest.raises(CorruptLedgerError, match="ledger index object k is damaged"):
        decode_index("k", blob[:-3])


def test_spans_are_merged_per_session_and_keep_only_their_keys():
    from magnetar.storage.object.ledger_index import spanned
    keys = sorted(f"data/{s}/{t:013d}-{t:08d}" for s in ("a", "b") for t in range(10))
    a, b = (lambda t: f"data/a/{t:013d}-{t:08d}"), (lambda t: f"data/b/{t:013d}-{t:08d}")
    assert spanned(keys, [(a(2), a(4)), (a(3), a(6)), (b(8), b(9)), (a(9), a(9))]) == {
        a(2), a(3), a(4), a(5), a(6), a(9), b(8), b(9)}
    assert spanned(keys, []) == set()
    assert len(spanned(keys, [(a(0), a(9))] * 10_000)) == 10
