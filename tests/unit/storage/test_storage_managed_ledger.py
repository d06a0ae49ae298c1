"""Managed ledgers: rollover, reads, reopen, crash recovery, properties, search."""
from __future__ import annotations

import asyncio
import os
import struct

import pytest

from magnetar.storage import (
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
    ManagedLedgerNotFoundError,
    Position,
)
from magnetar.storage.file.ledger import SEAL_TMP, log_path


def payload(i: int) -> bytes:
    return b"entry-%05d" % i


async def append_all(ml, count: int, start: int = 0) -> list[Position]:
    return list(await asyncio.gather(*(ml.append(payload(i)) for i in range(start, start + count))))


async def read_all(ml) -> list[bytes]:
    first = ml.first_position()
    if first is None:
        return []
    return [e.data for e in await ml.read_entries(first, 1_000_000)]


async def test_append_and_read_across_rollover(factories):
    ml = await factories(max_entries_per_ledger=10).open("t")
    positions = await append_all(ml, 35)
    assert positions == sorted(positions)
    assert len({p.ledger_id for p in positions}) == 4
    assert [p.entry_id for p in positions[:12]] == list(range(10)) + [0, 1]
    assert ml.last_confirmed == positions[-1]
    assert ml.entry_count == 35
    assert [i.entries for i in ml.ledgers] == [10, 10, 10, 5]
    assert [i.state for i in ml.ledgers] == ["closed", "closed", "closed", "open"]
    assert ml.total_size == sum(len(payload(i)) + 8 for i in range(35))
    assert await read_all(ml) == [payload(i) for i in range(35)]
    # a read starting in the middle spans ledgers
    entries = await ml.read_entries(positions[8], 5)
    assert [e.position for e in entries] == positions[8:13]
    # a start inside a gap moves to the next stored entry
    entries = await ml.read_entries(Position(positions[9].ledger_id, 99), 1)
    assert entries[0].position == positions[10]
    assert await ml.read_entries(ml.next_position(positions[-1]), 10) == []


async def test_reads_from_files_without_cache(factories):
    ml = await factories(max_entries_per_ledger=7, read_cache_bytes=0).open("t")
    await append_all(ml, 30)
    assert await read_all(ml) == [payload(i) for i in range(30)]
    entries = await ml.read_entries(ml.first_position(), 100, max_bytes=25)
    assert [e.data for e in entries] == [payload(0), payload(1), payload(2)]


async def test_small_cache_mixes_cache_and_file_reads(factories):
    ml = await factories(max_entries_per_ledger=50, read_cache_bytes=100).open("t")
    ml.add_listener(lambda: None)  # someone follows the topic: its tail is cached
    await append_all(ml, 120)
    assert 0 < ml._cache.bytes <= 100
    assert await read_all(ml) == [payload(i) for i in range(120)]


async def test_the_managed_ledgers_of_one_factory_share_the_cache_budget(factories):
    """Ten topics written in turn hold at most the factory's budget in their
    tail caches together (each could hold 10x that alone); what the oldest
    gave up is read from the files."""
    factory = factories(read_cache_bytes=100_000, cache_budget_bytes=2_000)
    ledgers = [await factory.open(f"t{i}") for i in range(10)]
    for ml in ledgers:
        ml.add_listener(lambda: None)  # followed: cached
        await append_all(ml, 40)
    assert factory.cache_budget.bytes == sum(ml._cache.bytes for ml in ledgers) <= 2_000 + 2_000 // 8
    assert ledgers[0]._cache.bytes == 0 and ledgers[-1]._cache.bytes > 0
    for ml in (ledgers[0], ledgers[-1]):
        assert await read_all(ml) == [payload(i) for i in range(40)]


async def test_the_tail_is_cached_only_while_someone_reads_it(factories, monkeypatch):
    """A topic only written to caches nothing (a backfill reads it later,
    from storage); one followed (an entry listener: a subscription, a
    replicator, a fetch at the tail) caches its tail; a read keeps the cache
    filling for READ_KEEPS_FILLING_S after it, then it stops."""
    from magnetar.storage import cache as cache_module

    factory = factories(read_cache_bytes=100_000)
    written = await factory.open("written")
    await append_all(written, 20)
    assert written._cache.bytes == 0 and factory.cache_budget.bytes == 0
    assert await read_all(written) == [payload(i) for i in range(20)]  # from the files

    followed = await factory.open("followed")
    unlisten = followed.add_listener(lambda: None)
    await append_all(followed, 20)
    assert followed._cache.bytes == sum(len(payload(i)) for i in range(20))
    unlisten()

    # ``written`` was read just now: its next entries are cached, for a while.
    await append_all(written, 5, start=20)
    assert written._cache.bytes == sum(len(payload(i)) for i in range(20, 25))
    monkeypatch.setattr(cache_module, "READ_KEEPS_FILLING_S", 0.0)  # that while is over
    await append_all(written, 5, start=25)
    assert written._cache.bytes == sum(len(payload(i)) for i in range(20, 25))  # nothing more
    assert await read_all(written) == [payload(i) for i in range(30)]


async def test_next_position_and_first_position(factories):
    ml = await factories(max_entries_per_ledger=3).open("t")
    assert ml.first_position() is None
    assert ml.last_confirmed is None
    positions = await append_all(ml, 6)
    assert ml.first_position() == positions[0]
    for a, b in zip(positions, positions[1:]):
        assert ml.next_position(a) == b
    assert ml.next_position(Position(positions[0].ledger_id, -1)) == positions[0]
    # past the end: the position the next append gets
    nxt = ml.next_position(positions[-1])
    assert await ml.append(b"x") == nxt


async def test_open_same_name_returns_same_instance(factories):
    factory = factories()
    a, b = await asyncio.gather(factory.open("x/y"), factory.open("x/y"))
    assert a is b
    assert await factory.open("x/y") is a
    with pytest.raises(ValueError):
        await factory.open("x//y")
    with pytest.raises(ValueError):
        await factory.open("a/cursors/b")


async def test_reopen_after_close_keeps_everything_and_starts_new_ledger(factories):
    ml = await factories(max_entries_per_ledger=10).open("t")
    positions = await append_all(ml, 25)
    ledger_ids = [i.ledger_id for i in ml.ledgers]
    await ml.close()
    assert ml.state == "closed"
    with pytest.raises(ManagedLedgerClosedError):
        await ml.append(b"late")
    ml2 = await factories().open("t")
    assert ml2 is not ml
    assert [i.ledger_id for i in ml2.ledgers][:-1] == ledger_ids
    assert ml2.ledgers[-1].ledger_id > ledger_ids[-1]
    assert ml2.ledgers[-1].state == "open"
    assert all(i.state == "closed" for i in ml2.ledgers[:-1])
    assert ml2.last_confirmed == positions[-1]
    assert await read_all(ml2) == [payload(i) for i in range(25)]
    pos = await ml2.append(b"more")
    assert pos == Position(ml2.ledgers[-1].ledger_id, 0)


async def test_reopen_without_appends_does_not_pile_up_empty_ledgers(factories):
    factory = factories()
    for _ in range(3):
        ml = await factory.open("t")
        await ml.close()
    ml = await factory.open("t")
    assert len(ml.ledgers) == 1
    assert sorted(n for n in os.listdir(factory.backend.ledger_dir) if n != SEAL_TMP) == [f"{ml.ledgers[0].ledger_id:020d}.log"]


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
async def test_crash_keeps_every_confirmed_entry(factories, policy):
    factory = factories(sync_policy=policy, max_entries_per_ledger=40)
    ml = await factory.open("t")
    await append_all(ml, 100)
    # some appends still in flight when the process dies
    for i in range(100, 110):
        ml.append(payload(i))
    factory.abandon()
    ml2 = await factories(sync_policy=policy).open("t")
    stored = await read_all(ml2)
    assert stored[:100] == [payload(i) for i in range(100)]
    assert stored == [payload(i) for i in range(len(stored))]
    assert all(i.state == "closed" for i in ml2.ledgers[:-1])
    assert ml2.last_confirmed == (await ml2.read_entries(ml2.first_position(), 1000))[-1].position
    await ml2.append(b"new")
    assert (await read_all(ml2))[-1] == b"new"


async def test_crash_with_torn_tail(factories):
    factory = factories()
    ml = await factory.open("t")
    positions = await append_all(ml, 20)
    lid = positions[-1].ledger_id
    factory.abandon()
    with open(log_path(factory.backend.ledger_dir, lid), "ab") as f:
        f.write(struct.pack(">II", 50, 12345) + b"torn")
    ml2 = await factories().open("t")
    assert await read_all(ml2) == [payload(i) for i in range(20)]
    assert [i.entries for i in ml2.ledgers] == [20, 0]
    await ml2.append(b"after")
    await ml2.close()
    ml3 = await factories().open("t")
    assert await read_all(ml3) == [payload(i) for i in range(20)] + [b"after"]


async def test_properties_persist(factories, store):
    factory = factories()
    ml = await factory.open("t")
    assert ml.properties == {}
    await ml.set_properties({"epoch": "1", "x": "y"})
    await ml.set_properties({"epoch": "2", "x": None})
    assert ml.properties == {"epoch": "2"}
    await append_all(ml, 3)
    factory.abandon()
    ml2 = await factories().open("t")
    assert ml2.properties == {"epoch": "2"}
    with pytest.raises(TypeError):
        await ml2.set_properties({"n": 1})


async def test_second_owner_fences_the_first(factories, wait_until):
    ml = await factories().open("t")
    await ml.append(b"a")
    other = await factories().open("t")  # another broker took over the metadata
    await other.append(b"b")
    await wait_until(lambda: ml.state == "fenced", what="the old owner noticing")
    with pytest.raises(ManagedLedgerFencedError):
        await ml.set_properties({"k": "v"})
    with pytest.raises(ManagedLedgerFencedError):
        await ml.append(b"c")
    assert await read_all(other) == [b"a", b"b"]


async def test_metadata_conflict_fences_even_without_watch(factories, store):
    ml = await factories().open("t")
    ml._record.stop_watching()  # as if the notification were lost
    record = await store.get("/managed-ledgers/t")
    await store.put("/managed-ledgers/t", record.value, record.version)
    with pytest.raises(ManagedLedgerFencedError):
        await ml.set_properties({"k": "v"})
    assert ml.state == "fenced"
    with pytest.raises(ManagedLedgerFencedError):
        await ml.append(b"c")


async def test_find_first_across_ledgers(factories):
    ml = await factories(max_entries_per_ledger=7).open("t")
    positions = await append_all(ml, 60)

    def at_least(n):
        return lambda e: int(e.data.split(b"-")[1]) >= n

    for n in (0, 1, 6, 7, 8, 33, 59):
        assert await ml.find_first(at_least(n)) == positions[n]
    assert await ml.find_first(at_least(60)) is None
    empty = await factories().open("empty")
    assert await empty.find_first(lambda e: True) is None


async def test_listener_wakes_on_confirmed_entries(factories, wait_until):
    ml = await factories().open("t")
    calls = []
    unsubscribe = ml.add_listener(lambda: calls.append(ml.last_confirmed))
    pos = await ml.append(b"a")
    await wait_until(lambda: calls, what="listener call")
    assert calls[-1] == pos
    unsubscribe()
    n = len(calls)
    await ml.append(b"b")
    await asyncio.sleep(0)
    assert len(calls) == n


async def test_appends_during_rollover_keep_order(factories):
    ml = await factories(max_entries_per_ledger=2).open("t")
    positions = await append_all(ml, 41)
    assert positions == sorted(positions)
    assert len({p.ledger_id for p in positions}) == 21
    assert await read_all(ml) == [payload(i) for i in range(41)]


async def test_rollover_by_bytes_and_age(factories, wait_until):
    ml = await factories(max_ledger_bytes=100).open("bytes")
    positions = await append_all(ml, 20)  # 18 bytes each on disk
    assert len({p.ledger_id for p in positions}) == 4
    aged = await factories(max_ledger_age_s=0.05).open("age")
    first = await aged.append(b"a")
    await wait_until(lambda: aged.ledgers[0].state == "closed", what="age rollover")
    second = await aged.append(b"b")
    assert second.ledger_id > first.ledger_id


async def test_list_and_delete(factories):
    factory = factories()
    for name in ("a", "a/b", "t/ns/persistent/x"):
        ml = await factory.open(name)
        await ml.append(b"data")
        await ml.open_cursor("sub/1")
    assert await factory.list_names() == ["a", "a/b", "t/ns/persistent/x"]
    ledger_files = set(os.listdir(factory.backend.ledger_dir))
    ml = await factory.open("a")
    own = {f"{i.ledger_id:020d}.log" for i in ml.ledgers}
    await factory.delete("a")
    assert await factory.list_names() == ["a/b", "t/ns/persistent/x"]
    assert set(os.listdir(factory.backend.ledger_dir)) - {SEAL_TMP} == ledger_files - own
    with pytest.raises(ManagedLedgerNotFoundError):
        await factory.delete("a")
    fresh = await factory.open("a")
    assert fresh.cursors == {}
    assert await read_all(fresh) == []


async def test_entries_may_be_memoryview(factories):
    ml = await factories().open("t")
    buf = bytearray(b"hello world")
    pos = await ml.append(memoryview(buf)[6:])
    buf[6:] = b"XXXXX"  # the caller may reuse its buffer
    (entry,) = await ml.read_entries(pos, 1)
    assert entry.data == b"world" and type(entry.data) is bytes
    with pytest.raises(ValueError):
        ml.append(b"")


async def test_durable_across_store_restart_with_sqlite(tmp_path):
    """With the SQLite store, a new process (new store and factory) sees
    every confirmed entry, the cursor and the properties after a crash."""
    from magnetar.metadata import SqliteMetadataStore
    from magnetar.storage import ManagedLedgerFactory, StorageConfig

    db = tmp_path / "meta.db"
    store = await SqliteMetadataStore.open(db)
    factory = ManagedLedgerFactory(tmp_path / "data", store, StorageConfig(max_entries_per_ledger=8))
    ml = await factory.open("tenant/ns/persistent/topic")
    positions = await append_all(ml, 30)
    await ml.set_properties({"epoch": "3"})
    cursor = await ml.open_cursor("sub", "earliest")
    await cursor.delete([positions[0], positions[1], positions[5]])
    factory.abandon()
    await store.close()

    store = await SqliteMetadataStore.open(db)
    factory = ManagedLedgerFactory(tmp_path / "data", store, StorageConfig())
    try:
        ml = await factory.open("tenant/ns/persistent/topic")
        assert await read_all(ml) == [payload(i) for i in range(30)]
        assert ml.properties == {"epoch": "3"}
        cursor = ml.cursors["sub"]
        assert cursor.mark_delete_position == positions[1]
        assert cursor.individually_deleted_ranges() == [(positions[5], positions[5])]
        assert await factory.list_names() == ["tenant/ns/persistent/topic"]
        later = await ml.append(b"later")
        assert later.ledger_id > positions[-1].ledger_id
    finally:
        await factory.close()
        await store.close()


async def test_missing_ledger_file_is_a_storage_error(factories):
    from magnetar.storage import StorageError

    factory = factories(max_entries_per_ledger=5, read_cache_bytes=0)
    ml = await factory.open("t")
    positions = await append_all(ml, 12)
    await ml.close()
    os.unlink(log_path(factory.backend.ledger_dir, positions[0].ledger_id))
    ml = await factories(read_cache_bytes=0).open("t")
    with pytest.raises(StorageError):
        await ml.read_entries(positions[0], 1)
    assert [e.position for e in await ml.read_entries(positions[5], 1)] == [positions[5]]


async def test_close_completes_pending_appends(factories):
    ml = await factories(max_entries_per_ledger=30).open("t")
    futures = [ml.append(payload(i)) for i in range(100)]
    await ml.close()
    assert all(f.done() and not f.exception() for f in futures)
    ml2 = await factories().open("t")
    assert await read_all(ml2) == [payload(i) for i in range(100)]


async def test_a_close_whose_caller_is_cancelled_still_finishes(factories):
    """An unload cut short by the broker's stop cancels its close half way:
    the close goes on, and the broker's own close of it at stop returns
    (it waited forever on a managed ledger left ``closing``)."""
    ml = await factories().open("t")
    futures = [ml.append(payload(i)) for i in range(50)]
    first = asyncio.get_running_loop().create_task(ml.close())
    for _ in range(10):  # till the close waits for the appends' sync (a thread: many loop passes)
        await asyncio.sleep(0)
        if ml.state == "closing":
            break
    assert ml.state == "closing"
    first.cancel()
    await asyncio.wait_for(ml.close(), 10)
    assert ml.state == "closed"
    assert all(f.done() and not f.exception() for f in futures)
    assert await read_all(await factories().open("t")) == [payload(i) for i in range(50)]


async def test_a_cursor_on_an_empty_ledger_dropped_at_close_still_sees_the_next_owners_entries(factories):
    """Ledger ids come from per-broker blocks, so the next owner's block may
    lie below an id the managed ledger named. Its close dropped its empty
    ledger from the record, yet the cursor still names ``(id, -1)``: the next
    owner's ledger must be above it, or every entry it writes sorts before
    the mark-delete position (backlog 0, nothing delivered: a partitioned
    topic's subscription lost three partitions after a bundle move)."""
    old, new = factories(), factories()
    new.ledger_ids.block = 8
    await new.ledger_ids.next()  # the new owner holds ids 2..8 from now on
    ml = await old.open("t")  # its ledger: 9
    cursor = await ml.open_cursor("sub", "earliest")
    named = cursor.mark_delete_position
    assert named.ledger_id > new.ledger_ids._next
    await ml.close()
    moved = await new.open("t")
    cursor = await moved.open_cursor("sub", "earliest")
    assert cursor.mark_delete_position == named
    pos = await moved.append(b"after the move")
    assert pos > named
    assert cursor.backlog() == 1
    assert [e.data for e in await cursor.read_entries(10)] == [b"after the move"]
