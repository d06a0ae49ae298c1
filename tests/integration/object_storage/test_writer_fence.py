"""Layout format 2 (a fence per writer, one index record per commit) against
a real etcd and a real SeaweedFS: two backends on one place are two brokers.
Each test asserts what the writer's fence or the commit records must give,
and would fail without them: the zombie's commit refused after a fence, a
ledger fenced while its writer was idle refused at its next commit, a
deletion by another broker fencing the writer, recovery from commit
records, records released after compaction, a session's end refusing its
writer, format-1 and format-2 ledgers in one commit."""
from __future__ import annotations

import asyncio
import json

import pytest

from magnetar import formats
from magnetar.formats import NewerFormatError, check_data_set
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFencedError
from magnetar.storage.object import index
from magnetar.storage.object.commit_records import COMMITS
from magnetar.storage.object.compactor import collect_orphans
from magnetar.storage.object.index import ROOT, compacted_key, ledger_key
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.writer_fence import WRITERS, writer_key

from ...helpers import wait_until


def backend_on(store, objects_url, **kw) -> ObjectBackend:
    kw.setdefault("layout", 2)
    return ObjectBackend(store, open_object_store(objects_url), commit_interval_ms=1, collect_interval_s=None,
                         profile="latency", **kw)


async def write(backend, ledger, datas) -> asyncio.Future:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    backend.submit(ledger, datas, done.set_result, loop)
    return done


async def outcome(backend, ledger, datas):
    return await asyncio.wait_for(await write(backend, ledger, datas), 10)


async def read_all(backend, ledger) -> list[bytes]:
    out: list[bytes] = []
    while len(out) < ledger.entry_count:
        out += await backend.read(ledger, len(out), ledger.entry_count - 1, None)
    return out


@pytest.fixture
async def two(etcd_store, objects_url):
    a, b = backend_on(etcd_store, objects_url), backend_on(etcd_store, objects_url)
    yield a, b
    for backend in (a, b):
        await backend.close()


async def test_format_2_records_one_commit_record_and_no_section_records(etcd_store, two):
    a, _ = two
    ledgers = [await a.create(i) for i in (1, 2, 3)]
    for n in range(3):
        assert await asyncio.gather(*[outcome(a, ml, [f"{ml.ledger_id}-{n}".encode()]) for ml in ledgers]) \
            == [None] * 3
    doc = json.loads((await etcd_store.get(ledger_key(1))).value)
    assert doc["format"] == 2 and doc["writer"] == a._writer.writer
    for ml in ledgers:
        assert await etcd_store.children(f"{ledger_key(ml.ledger_id)}/s") == []
    assert await etcd_store.children(f"{COMMITS}/{a._writer.writer}")  # the index is per commit


async def test_a_zombie_writer_gets_no_receipt_after_the_fence(two):
    old, new = two
    fenced, other = await old.create(1), await old.create(2)
    assert await outcome(old, fenced, [b"a0", b"a1"]) is None
    await new.fence(1)
    # The zombie's next commit carries both: the fenced ledger is refused, the other commits.
    refused, kept = await write(old, fenced, [b"z"]), await write(old, other, [b"o"])
    assert isinstance(await asyncio.wait_for(refused, 10), ManagedLedgerFencedError)
    assert await asyncio.wait_for(kept, 10) is None
    recovered = await new.recover(1)
    assert await read_all(new, recovered) == [b"a0", b"a1"]  # everything acknowledged, nothing after
    assert isinstance(await outcome(old, fenced, [b"z2"]), ManagedLedgerFencedError)
    assert await outcome(old, other, [b"o2"]) is None


async def test_a_ledger_fenced_while_its_writer_is_idle_is_refused_at_its_next_commit(two):
    old, new = two
    idle, busy = await old.create(1), await old.create(2)
    assert await outcome(old, idle, [b"i0"]) is None
    await new.fence(1)
    # Commits of the other ledger first: the writer learns the fence from them ...
    assert await outcome(old, busy, [b"b0"]) is None
    assert await outcome(old, busy, [b"b1"]) is None
    # ... and its later commits (which compare the fence it read) still refuse the idle one.
    assert isinstance(await outcome(old, idle, [b"i1"]), ManagedLedgerFencedError)
    assert await read_all(new, await new.recover(1)) == [b"i0"]


async def test_deleting_a_ledger_another_writer_holds_fences_it(etcd_store, two):
    writer, deleter = two
    ledger = await writer.create(1)
    assert await outcome(writer, ledger, [b"x"]) is None
    await deleter.delete(1)
    assert await etcd_store.get(ledger_key(1)) is None
    assert 1 in json.loads((await etcd_store.get(writer_key(writer._writer.writer))).value)["fenced"]
    assert isinstance(await outcome(writer, ledger, [b"after"]), ManagedLedgerFencedError)


async def test_a_writer_whose_session_ended_commits_nothing_more(etcd_store, two):
    old, new = two
    ledger = await old.create(1)
    assert await outcome(old, ledger, [b"before"]) is None
    dead = old._writer
    await old._sessions[0].close()  # as an expired lease: its ``alive`` key is gone
    assert isinstance(await outcome(old, ledger, [b"after"]), ManagedLedgerFencedError)
    assert dead.dead
    fresh = await old.create(2)  # a new writer (and session) for the ledgers created from now on
    assert old._writer is not dead
    assert await outcome(old, fresh, [b"y"]) is None
    assert await read_all(new, await new.recover(1)) == [b"before"]


async def test_recovery_reads_the_writers_commit_records_shared_by_a_takeover(two):
    old, new = two
    ledgers = [await old.create(i) for i in range(1, 6)]
    expected = {ml.ledger_id: [] for ml in ledgers}
    for n in range(4):
        futures = []
        for ml in ledgers[n % 2:]:  # not every ledger in every commit
            data = f"{ml.ledger_id}:{n}".encode()
            expected[ml.ledger_id].append(data)
            futures.append(await write(old, ml, [data]))
        assert await asyncio.wait_for(asyncio.gather(*futures), 10) == [None] * len(futures)
    for ml in ledgers:
        await new.fence(ml.ledger_id)
    recovered = await asyncio.gather(*(new.recover(ml.ledger_id) for ml in ledgers))
    for ml, got in zip(ledgers, recovered):
        assert got.entry_count == len(expected[ml.ledger_id])
        assert await read_all(new, got) == expected[ml.ledger_id]


async def test_commit_records_are_released_once_their_ledgers_are_compacted(etcd_store, objects, two):
    writer, reader = two
    first, second = await writer.create(1), await writer.create(2)
    for n in range(3):
        assert await asyncio.gather(outcome(writer, first, [b"f%d" % n]), outcome(writer, second, [b"s%d" % n])) \
            == [None, None]
    records = f"{COMMITS}/{writer._writer.writer}"
    names = await etcd_store.children(records)
    assert names
    await writer.seal(first)
    await wait_until(lambda: etcd_store.exists(compacted_key(1)), what="ledger 1 compacted")
    # Records of any age (by default those of objects younger than the bound are left as they are).
    await collect_orphans(etcd_store, objects, older_than_s=3600, records_older_than_s=0)
    # Rewritten without the compacted ledger, kept for the other one.
    left = [json.loads((await etcd_store.get(f"{records}/{n}")).value) for n in await etcd_store.children(records)]
    assert left and all([row[0] for row in doc["s"]] == [2] for doc in left)
    await writer.seal(second)
    await wait_until(lambda: etcd_store.exists(compacted_key(2)), what="ledger 2 compacted")
    await collect_orphans(etcd_store, objects, older_than_s=0)
    assert await etcd_store.children(records) == []
    assert await objects.list("data/") == []  # their commit objects are garbage now
    # The compacted ledgers still read back (from their chunks) on another broker.
    fresh = await reader.open_sealed(1, 3)
    assert await read_all(reader, fresh) == [b"f0", b"f1", b"f2"]
    # The writer's fence key goes once its session ended and no record is left.
    await writer.close()
    await collect_orphans(etcd_store, objects, older_than_s=0)
    assert await etcd_store.children(WRITERS) == []


async def test_format_1_and_format_2_ledgers_in_one_commit(etcd_store, objects_url, two):
    _, new = two
    mixed = backend_on(etcd_store, objects_url, layout=1)
    try:
        v1 = await mixed.create(1)
        mixed.layout = 2  # the broker's config changed: ledgers created from now are format 2
        v2 = await mixed.create(2)
        assert [json.loads((await etcd_store.get(ledger_key(i))).value)["format"] for i in (1, 2)] == [1, 2]
        puts = mixed.committer.puts
        assert await asyncio.gather(outcome(mixed, v1, [b"one"]), outcome(mixed, v2, [b"two"])) == [None, None]
        assert mixed.committer.puts - puts == 1  # one object for both layouts
        assert await etcd_store.children(f"{ledger_key(1)}/s") and not await etcd_store.children(f"{ledger_key(2)}/s")
        for lid in (1, 2):
            await new.fence(lid)
        assert [type(await outcome(mixed, ml, [b"z"])) for ml in (v1, v2)] == [ManagedLedgerFencedError] * 2
        assert await read_all(new, await new.recover(1)) == [b"one"]
        assert await read_all(new, await new.recover(2)) == [b"two"]
    finally:
        await mixed.close()


async def test_a_broker_that_reads_only_format_1_refuses_format_2_with_one_line(etcd_store, two, monkeypatch):
    writer, _ = two
    await check_data_set(etcd_store)
    assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 1
    await writer.create(1)
    assert json.loads((await etcd_store.get(formats.PATH)).value)["kinds"]["object_layout"] == 2
    # What the code before format 2 does (it read up to 1): refuse, at start and per ledger.
    monkeypatch.setitem(formats.KINDS, "object_layout", 1)
    monkeypatch.setattr(index, "LAYOUT_FORMAT", 1)
    with pytest.raises(NewerFormatError, match="object layout .* is in format 2, newer than this Magnetar"):
        await check_data_set(etcd_store)
    with pytest.raises(NewerFormatError, match=r"object-store ledger at .*1 is in format 2") as caught:
        index.check_ledger_record(ledger_key(1), (await etcd_store.get(ledger_key(1))).value)
    assert "\n" not in str(caught.value)
    assert ROOT in str(caught.value)
