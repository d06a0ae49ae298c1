"""Cursors: acks, persistence, reset, backlog, reading, and trimming."""
from __future__ import annotations

import asyncio
import os

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import CursorFencedError, ManagedLedgerClosedError, Position
from magnetar.storage.file.ledger import log_path


async def fill(ml, count: int) -> list[Position]:
    return list(await asyncio.gather(*(ml.append(b"m%d" % i) for i in range(count))))


async def test_initial_positions(factories):
    ml = await factories().open("t")
    positions = await fill(ml, 5)
    latest = await ml.open_cursor("latest")
    earliest = await ml.open_cursor("earliest", "earliest")
    assert latest.mark_delete_position == positions[-1]
    assert latest.backlog() == 0 and not latest.has_more_entries()
    assert earliest.mark_delete_position == Position(positions[0].ledger_id, -1)
    assert earliest.backlog() == 5 and earliest.has_more_entries()
    assert earliest.read_position == positions[0]
    assert await ml.open_cursor("latest") is latest
    assert set(ml.cursors) == {"latest", "earliest"}
    with pytest.raises(ValueError):
        await ml.open_cursor("bad", "middle")


async def test_mark_delete_and_individual_acks_across_ledgers(factories):
    ml = await factories(max_entries_per_ledger=4).open("t")
    p = await fill(ml, 12)  # ledgers of 4 entries
    c = await ml.open_cursor("sub", "earliest")
    await c.delete([p[1], p[2], p[3], p[5], p[9]])
    assert c.mark_delete_position == Position(p[0].ledger_id, -1)
    assert c.backlog() == 7
    assert c.individually_deleted_ranges() == [(p[1], p[3]), (p[5], p[5]), (p[9], p[9])]
    await c.delete([p[0]])  # fills the hole: md jumps over the run, up to the ledger's end
    assert c.mark_delete_position == p[3]
    await c.delete([p[4]])  # crosses the ledger boundary onto the acked p[5]
    assert c.mark_delete_position == p[5]
    assert c.individually_deleted_ranges() == [(p[9], p[9])]
    assert c.is_deleted(p[2]) and c.is_deleted(p[9]) and not c.is_deleted(p[6])
    assert c.backlog() == 5
    await c.mark_delete(p[2])  # behind mark-delete: ignored
    assert c.mark_delete_position == p[5]
    await c.mark_delete(p[8])  # joins the acked p[9]
    assert c.mark_delete_position == p[9]
    assert c.individually_deleted_ranges() == []
    assert c.backlog() == 2
    await c.delete([p[9], Position(p[9].ledger_id, 100), Position(999, 0)])  # ignored
    assert c.backlog() == 2
    await c.mark_delete(Position(10**6, 0))  # clamped to the last confirmed entry
    assert c.mark_delete_position == p[-1]
    assert c.backlog() == 0


async def test_read_entries_skips_acked_and_advances(factories):
    ml = await factories(max_entries_per_ledger=3).open("t")
    p = await fill(ml, 10)
    c = await ml.open_cursor("sub", "earliest")
    await c.delete([p[1], p[3], p[4], p[5]])
    got = await c.read_entries(3)
    assert [e.position for e in got] == [p[0], p[2], p[6]]
    assert c.read_position == p[7]
    got = await c.read_entries(100)
    assert [e.position for e in got] == [p[7], p[8], p[9]]
    assert not c.has_more_entries()
    assert await c.read_entries(10) == []
    c.rewind()
    assert c.read_position == p[0]
    c.seek(p[8])
    assert [e.position for e in await c.read_entries(10)] == [p[8], p[9]]
    assert c.mark_delete_position == Position(p[0].ledger_id, -1)  # seek moves no acks


async def test_reset(factories):
    ml = await factories(max_entries_per_ledger=3).open("t")
    p = await fill(ml, 9)
    c = await ml.open_cursor("sub", "earliest")
    await ml.open_cursor("holder", "earliest")  # keeps every ledger from trimming
    await c.mark_delete(p[7])
    await c.reset(p[3])  # first entry of the second ledger
    assert c.mark_delete_position == Position(p[3].ledger_id, -1)
    assert c.read_position == p[3]
    assert c.backlog() == 6
    await c.delete([p[5]])
    await c.reset(p[4])
    assert c.mark_delete_position == p[3]
    assert c.individually_deleted_ranges() == []
    await c.reset(Position(10**6, 5))  # past the end: everything acked
    assert c.backlog() == 0
    new = await ml.append(b"new")
    assert c.backlog() == 1
    assert [e.position for e in await c.read_entries(5)] == [new]


async def test_state_survives_reopen_and_crash(factories):
    factory = factories(max_entries_per_ledger=4)
    ml = await factory.open("t")
    p = await fill(ml, 10)
    c = await ml.open_cursor("odd/name %?", "earliest")
    await c.mark_delete(p[2])
    await c.delete([p[4], p[6], p[7]])
    await c.set_properties({"k": 5})
    factory.abandon()  # crash: nothing closed cleanly
    ml2 = await factories().open("t")
    c2 = ml2.cursors["odd/name %?"]
    assert c2.mark_delete_position == p[2]
    assert c2.individually_deleted_ranges() == [(p[4], p[4]), (p[6], p[7])]
    assert c2.properties == {"k": 5}
    assert c2.read_position == p[3]
    assert c2.backlog() == 4
    assert [e.position for e in await c2.read_entries(10)] == [p[3], p[5], p[8], p[9]]
    await ml2.close()
    ml3 = await factories().open("t")
    assert ml3.cursors["odd/name %?"].individually_deleted_ranges() == [(p[4], p[4]), (p[6], p[7])]


def _cursor_writes(store, delay: float = 0.0) -> list[bytes]:
    """The values of the cursor records ``store`` is asked to write from now on
    (cursors write in a transaction fenced by their managed ledger's record)."""
    writes: list[bytes] = []
    real = store.transaction

    async def counting(compares, ops, *, versions=True):
        cursor_puts = [op.value for op in ops if "/cursors/" in op.key and hasattr(op, "value")]
        writes.extend(cursor_puts)
        if cursor_puts and delay:
            await asyncio.sleep(delay)
        return await real(compares, ops, versions=versions)

    store.transaction = counting
    return writes


async def test_persists_coalesce(factories, store):
    puts = _cursor_writes(store, delay=0.01)  # a slow metadata store
    ml = await factories().open("t")
    p = await fill(ml, 100)
    c = await ml.open_cursor("sub", "earliest")
    puts.clear()
    await asyncio.gather(*(c.delete([pos]) for pos in reversed(p)))
    assert c.mark_delete_position == p[-1]
    assert 1 <= len(puts) <= 3
    raw = (await store.get(f"/managed-ledgers/t/cursors/sub")).value
    assert b'"mark_delete":[%d,%d]' % (p[-1].ledger_id, p[-1].entry_id) in raw


async def test_non_durable_cursor(factories, store):
    ml = await factories().open("t")
    p = await fill(ml, 5)
    reader = ml.new_non_durable_cursor(p[1])
    assert not reader.durable
    assert [e.position for e in await reader.read_entries(10)] == p[2:]
    await reader.mark_delete(p[3])
    assert reader.backlog() == 1
    assert ml.cursors == {}
    assert await store.children("/managed-ledgers/t/cursors") == []


async def test_delete_cursor(factories, store):
    ml = await factories().open("t")
    c = await ml.open_cursor("sub")
    await ml.delete_cursor("sub")
    assert ml.cursors == {}
    assert await store.children("/managed-ledgers/t/cursors") == []
    with pytest.raises(ManagedLedgerClosedError):
        await c.mark_delete(Position(0, 0))
    await ml.delete_cursor("never-existed")


async def test_cursor_fenced_by_concurrent_writer(factories, store):
    ml = await factories().open("t")
    await fill(ml, 3)
    c = await ml.open_cursor("sub", "earliest")
    await store.put("/managed-ledgers/t/cursors/sub", b'{"name":"sub","mark_delete":[0,-1]}')
    told = []
    ml.add_fence_listener(lambda: told.append(ml.let_go_reason))
    with pytest.raises(CursorFencedError):
        await c.mark_delete(ml.last_confirmed)
    await asyncio.sleep(0)
    # Whoever serves from it hears at once (the broker unloads the topic),
    # with the cursor's error; the managed ledger itself is not fenced.
    assert len(told) == 1 and isinstance(told[0], CursorFencedError)
    assert ml.state == "open"
    await ml.append(b"still ours")


async def test_a_cursor_created_though_its_answer_was_lost_tells_the_managed_ledgers_users(factories, store):
    """Its record landed after the managed ledger loaded its cursors (the
    store lost the answer): opening it again meets the record; the topic
    is told to let go, and a new instance loads the cursor as stored."""
    factory = factories()
    ml = await factory.open("t")
    await fill(ml, 3)
    await store.put("/managed-ledgers/t/cursors/sub", b'{"name":"sub","mark_delete":[0,1]}')
    told = []
    ml.add_fence_listener(lambda: told.append(ml.let_go_reason))
    with pytest.raises(CursorFencedError):
        await ml.open_cursor("sub", "earliest")
    await asyncio.sleep(0)
    assert len(told) == 1 and isinstance(told[0], CursorFencedError)
    await ml.close()
    again = await factory.open("t")
    assert again.cursors["sub"].mark_delete_position == Position(0, 1)


def ledger_files(factory) -> set[int]:
    return {int(name[:20]) for name in os.listdir(factory.backend.ledger_dir) if name.endswith(".log")}


async def test_trimming_deletes_consumed_ledgers(factories, wait_until):
    factory = factories(max_entries_per_ledger=5)
    ml = await factory.open("t")
    p = await fill(ml, 23)  # ledgers: 5 5 5 5 3(open)
    ids = [i.ledger_id for i in ml.ledgers]
    fast = await ml.open_cursor("fast", "earliest")
    slow = await ml.open_cursor("slow", "earliest")
    await fast.mark_delete(p[-1])
    await asyncio.sleep(0)
    assert [i.ledger_id for i in ml.ledgers] == ids  # slow holds everything
    await slow.mark_delete(p[9])  # consumes the first two ledgers exactly
    await wait_until(lambda: ledger_files(factory) == set(ids[2:]), what="trim")
    assert [i.ledger_id for i in ml.ledgers] == ids[2:]
    assert ml.first_position() == p[10]
    assert ml.entry_count == 13
    assert slow.backlog() == 13
    await slow.mark_delete(p[12])  # inside ledger 3: it stays
    await asyncio.sleep(0.01)
    assert [i.ledger_id for i in ml.ledgers] == ids[2:]
    # trimmed state survives reopen
    await ml.close()
    ml2 = await factories().open("t")
    assert ml2.first_position() == p[10]
    assert await ml2.read_entries(p[0], 1) == [await ml2.read_entries(p[10], 1)][0]


async def test_no_durable_cursor_keeps_everything(factories):
    factory = factories(max_entries_per_ledger=3)
    ml = await factory.open("t")
    p = await fill(ml, 10)
    reader = ml.new_non_durable_cursor(p[-1])
    await reader.mark_delete(p[-1])
    c = await ml.open_cursor("tmp", "latest")
    await ml.delete_cursor("tmp")
    await asyncio.sleep(0.01)
    assert ml.entry_count == 10
    assert len(ledger_files(factory)) == 4


async def test_retention_keeps_consumed_ledgers(factories, wait_until):
    factory = factories(max_entries_per_ledger=5, retention_size_bytes=120)
    ml = await factory.open("t")
    p = await fill(ml, 20)  # closed ledgers of 50, 50, 55, 55 bytes, then an empty open one
    c = await ml.open_cursor("sub", "latest")
    await c.mark_delete(p[-1])
    # a ledger goes while the size, counting it, exceeds the retention size
    await wait_until(lambda: len(ml.ledgers) == 3, what="size-based trim")
    await ml.append(b"more")
    await asyncio.sleep(0.01)
    assert ml.total_size == 55 + 55 + 12
    aged = await factories(max_entries_per_ledger=2, retention_time_s=0.2).open("aged")
    q = await fill(aged, 4)
    c = await aged.open_cursor("sub", "latest")
    await c.mark_delete(q[-1])
    await asyncio.sleep(0.05)
    assert aged.entry_count == 4  # too young
    # The ledger holding the last entry always stays.
    await wait_until(lambda: aged.entry_count == 2, timeout=5, what="time-based trim")


async def test_trim_with_sqlite_like_restart(factories, tmp_path):
    """Cursor keys with odd names round-trip through the store."""
    ml = await factories().open("t")
    names = ["a/b", "%41", ".", "..", "ünï", "x y"]
    for name in names:
        await ml.open_cursor(name)
    await ml.close()
    ml2 = await factories().open("t")
    assert sorted(ml2.cursors) == sorted(names)


async def test_acks_on_an_empty_managed_ledger_are_ignored(factories):
    ml = await factories().open("t")
    c = await ml.open_cursor("sub")
    md = c.mark_delete_position
    await c.mark_delete(Position(md.ledger_id, 10))
    await c.delete([Position(md.ledger_id, 0)])
    assert c.mark_delete_position == md
    first = await ml.append(b"first")
    assert c.backlog() == 1
    assert [e.position for e in await c.read_entries(5)] == [first]


async def test_persist_interval_batches_acks(factories, store):
    puts = _cursor_writes(store)
    ml = await factories(cursor_persist_interval_ms=50).open("t")
    p = await fill(ml, 10)
    c = await ml.open_cursor("sub", "earliest")  # first write: at once
    await asyncio.gather(*(c.delete([pos]) for pos in p))  # all wait for one write
    assert c.mark_delete_position == p[-1]
    assert len(puts) == 2


async def test_the_last_entry_survives_trimming_across_restarts(factories, wait_until):
    """Everything consumed, restarted twice: the last entry is still readable,
    so upper layers can recover what follows it (e.g. the next topic offset)."""
    factory = factories(max_entries_per_ledger=3)
    ml = await factory.open("t")
    cursor = await ml.open_cursor("sub", "earliest")
    positions = [await ml.append(f"e{i}".encode()) for i in range(7)]
    await cursor.mark_delete(positions[-1])
    await wait_until(lambda: ml.entry_count == 1, what=f"consumed ledgers trimmed ({ml.ledgers})")
    await factory.close()
    for _ in range(2):
        factory = factories(max_entries_per_ledger=3)
        ml = await factory.open("t")
        assert ml.last_confirmed == positions[-1]
        (entry,) = await ml.read_entries(positions[-1], 1)
        assert entry.data == b"e6"
        await factory.close()


async def test_a_ledger_closed_for_a_move_keeps_its_cursors_until_told(factories):
    """A topic moving to another broker closes its ledger but keeps taking acks
    until the hand-over; the next owner reads them from the store."""
    ml = await factories().open("moving")
    p = await fill(ml, 6)
    c = await ml.open_cursor("sub", "earliest")
    await c.delete([p[0], p[1]])
    await ml.close(keep_cursors=True)
    with pytest.raises(ManagedLedgerClosedError):
        await ml.append(b"late")
    await c.delete([p[2]])  # an ack that arrives while the topic moves: kept
    await c.delete([p[4]])
    await ml.close_cursors()
    with pytest.raises(ManagedLedgerClosedError):
        await c.delete([p[5]])  # after the hand-over: the next owner's business
    next_owner = await factories().open("moving")
    again = await next_owner.open_cursor("sub")
    assert again.mark_delete_position == p[2]
    assert again.individually_deleted_ranges() == [(p[4], p[4])]


async def test_a_failed_persist_whose_waiter_was_cancelled_logs_no_unretrieved_exception(data_dir):
    """Found by the chaos partition fault: an ack's persist in flight when
    etcd became unreachable, its waiter cancelled (the topic unloading); the
    write then failed and asyncio logged "Task exception was never
    retrieved" with a traceback, as if something had gone unhandled."""
    import gc

    from magnetar.metadata.store import MetadataError
    from magnetar.storage import ManagedLedgerFactory, StorageConfig

    class Outage(MemoryMetadataStore):
        """Cursor writes hang until ``cut`` is set, then fail as etcd's do."""

        def __init__(self) -> None:
            super().__init__()
            self.hanging = asyncio.Event()
            self.cut = asyncio.Event()

        async def transaction(self, compares, writes, *, versions=True):
            if self.hanging.is_set():  # only the cursor writes while the test holds it
                await self.cut.wait()
                raise MetadataError("etcd unreachable")
            return await super().transaction(compares, writes, versions=versions)

    loop = asyncio.get_running_loop()
    unhandled: list[dict] = []
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    store = Outage()
    factory = ManagedLedgerFactory(data_dir, store, StorageConfig())
    try:
        ml = await factory.open("t")
        positions = await fill(ml, 3)
        cursor = await ml.open_cursor("sub", "earliest")
        store.hanging.set()
        ack = asyncio.create_task(cursor.delete([positions[0]]))
        while cursor._persist_task is None:
            await asyncio.sleep(0)
        ack.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ack
        store.cut.set()
        while cursor._persist_task is not None:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        gc.collect()
        assert not [c for c in unhandled if "never retrieved" in c.get("message", "")], unhandled
    finally:
        store.hanging.clear()
        loop.set_exception_handler(None)
        await factory.close()


async def test_a_cursor_reading_at_the_tail_skips_nothing_across_rollovers(factories):
    """Found by the chaos partition run (seed 11; a Key_Shared consumer never
    got entry 50,000, the first of the second ledger): while a rollover ran,
    ``next_position`` of the old ledger's last entry was where the *next*
    append would go, past the appends already waiting for the new ledger, so
    a cursor reading at the tail jumped over them; Shared, Failover and
    Key_Shared consumers all lost whole ledgers' worth with small ledgers."""
    ml = await factories(max_entries_per_ledger=5).open("t")
    cursor = await ml.open_cursor("tail", "earliest")
    total = 300
    got: list[bytes] = []

    produced = asyncio.Event()

    async def produce() -> None:
        pending = []
        for i in range(total):
            pending.append(ml.append(b"m%d" % i))
            if i % 7 == 0:
                await asyncio.sleep(0)  # let the reader and the rollover run between appends
        await asyncio.gather(*pending)
        produced.set()

    async def consume() -> None:
        # Reads until every append is acknowledged and a read at the tail
        # finds nothing more: a skipped entry then shows at once, whatever the
        # machine's speed (a deadline on the count failed a loaded run that
        # skipped nothing). The deadline only guards against a hang.
        deadline = asyncio.get_running_loop().time() + 120
        while asyncio.get_running_loop().time() < deadline:
            done = produced.is_set()
            entries = await cursor.read_entries(3)
            got.extend(e.data for e in entries)
            await cursor.delete([e.position for e in entries])
            if not entries:
                if done:
                    return
                await asyncio.sleep(0.001)

    await asyncio.gather(produce(), consume())
    missing = sorted(set(b"m%d" % i for i in range(total)) - set(got))
    assert missing == [] and got == [b"m%d" % i for i in range(total)], f"{len(missing)} skipped: {missing[:10]}"
