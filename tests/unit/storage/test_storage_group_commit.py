"""Group commit: ordering, fsync batching, sync policies, write failures."""
from __future__ import annotations

import asyncio
import os
import threading

import pytest

from magnetar.storage import LedgerFencedError, Position, StorageConfig, StorageError
from magnetar.storage.file.group_commit import GroupCommitWriter
from magnetar.storage.file.ledger import Ledger, LedgerState


@pytest.mark.parametrize("policy", ["always", "interval", "never"])
async def test_concurrent_appends_complete_in_order(factories, policy):
    factory = factories(sync_policy=policy, sync_interval_ms=5)
    ml = await factory.open("t")
    completed: list[Position] = []

    async def appender(k: int) -> list[Position]:
        out = []
        for i in range(50):
            fut = ml.append(b"%d-%d" % (k, i))
            fut.add_done_callback(lambda f: completed.append(f.result()))
            out.append(await fut)
        return out

    results = await asyncio.gather(*(appender(k) for k in range(40)))
    assert completed == sorted(completed)
    assert len(set(completed)) == 2000
    for positions in results:
        assert positions == sorted(positions)
    entries = await ml.read_entries(ml.first_position(), 5000)
    assert [e.position for e in entries] == completed
    by_pos = {e.position: e.data for e in entries}
    for k, positions in enumerate(results):
        assert [by_pos[p] for p in positions] == [b"%d-%d" % (k, i) for i in range(50)]
    writer = factory.backend.writer
    if policy == "always":
        # one fsync covers many appends under concurrency
        assert 0 < writer.fsync_count < 2000 / 4
    if policy == "never":
        assert writer.fsync_count == 0


async def test_interval_policy_syncs_periodically(factories, wait_until):
    factory = factories(sync_policy="interval", sync_interval_ms=10)
    ml = await factory.open("t")
    await ml.append(b"one")
    await wait_until(lambda: factory.backend.writer.fsync_count >= 1, what="periodic fsync")


async def test_interval_syncs_run_beside_the_writer_and_survive_rollovers(factories, caplog):
    """Periodic syncs run on their own thread (a slow fdatasync must not hold
    up the appends queued behind it), and a ledger sealed and closed by a
    rollover while the syncer holds it is neither an error nor a lost sync."""
    factory = factories(sync_policy="interval", sync_interval_ms=1, max_entries_per_ledger=7)
    ml = await factory.open("t")
    assert any(t.name.endswith("-syncer") and t.is_alive() for t in threading.enumerate())
    positions = await asyncio.gather(*(ml.append(b"%d" % i) for i in range(1500)))
    for i in range(300):
        positions.append(await ml.append(b"tail-%d" % i))
    assert len({p.ledger_id for p in positions}) > 100  # many rollovers happened under the syncer
    entries = await ml.read_entries(ml.first_position(), 5000)
    assert len(entries) == 1800
    assert not [r for r in caplog.records if "fsync" in r.getMessage()]
    assert factory.backend.writer.fsync_count > 0


async def test_writer_call_runs_after_earlier_writes(tmp_path):
    writer = GroupCommitWriter("always")
    ledger = Ledger.create(tmp_path, 1)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    writer.submit_write(ledger, [b"x"] * 10, lambda err: done.set_result(err), loop)
    count = await writer.call(lambda: ledger.entry_count)
    assert count == 10
    assert await done is None
    await writer.close()
    ledger.close()


def _break_writes(ledger: Ledger) -> None:
    """Make the ledger's fd refuse writes (a real EBADF, no mocks); reads still work."""
    ro = os.open(ledger.directory / f"{ledger.ledger_id:020d}.log", os.O_RDONLY)
    fd = ledger._handle.acquire()  # the pooled descriptor (handles.py), pinned for the swap
    os.dup2(ro, fd)
    ledger._handle.release()
    os.close(ro)


async def test_failed_write_fails_later_appends_in_that_ledger_then_rolls(factories, store):
    factory = factories()
    ml = await factory.open("t")
    ok = [await ml.append(b"ok%d" % i) for i in range(3)]
    broken_id = ml.ledgers[-1].ledger_id
    _break_writes(ml._appends.current)
    futs = [ml.append(b"bad%d" % i) for i in range(5)]
    outcomes = await asyncio.gather(*futs, return_exceptions=True)
    assert all(isinstance(o, StorageError) for o in outcomes)
    # appends issued after the failure go to a new ledger
    pos = await ml.append(b"later")
    assert pos.ledger_id > broken_id
    infos = {i.ledger_id: i for i in ml.ledgers}
    assert infos[broken_id].state == "closed" and infos[broken_id].entries == 3
    entries = await ml.read_entries(ml.first_position(), 100)
    assert [e.data for e in entries] == [b"ok0", b"ok1", b"ok2", b"later"]
    assert [e.position for e in entries][:3] == ok
    await ml.close()
    # the broken ledger is consistent on reopen
    ml2 = await factories().open("t")
    entries = await ml2.read_entries(ml2.first_position(), 100)
    assert [e.data for e in entries] == [b"ok0", b"ok1", b"ok2", b"later"]


async def test_writer_fences_ledger_after_failed_write(tmp_path):
    writer = GroupCommitWriter("always")
    ledger = Ledger.create(tmp_path, 1)
    loop = asyncio.get_running_loop()
    first = loop.create_future()
    writer.submit_write(ledger, [b"a"], lambda err: first.set_result(err), loop)
    assert await first is None
    _break_writes(ledger)
    results = [loop.create_future() for _ in range(3)]
    for fut in results:
        writer.submit_write(ledger, [b"b"], lambda err, fut=fut: fut.set_result(err), loop)
    errors = await asyncio.gather(*results)
    assert all(isinstance(e, StorageError) for e in errors)
    assert ledger.entry_count == 1
    assert ledger.state is LedgerState.FENCED
    late = loop.create_future()
    writer.submit_write(ledger, [b"c"], lambda err: late.set_result(err), loop)
    assert isinstance(await late, LedgerFencedError)
    await writer.close()
    ledger.close()


def test_config_validation():
    with pytest.raises(ValueError, match="sync_policy"):
        StorageConfig(sync_policy="sometimes")
    with pytest.raises(ValueError, match="max_entries_per_ledger"):
        StorageConfig(max_entries_per_ledger=0)
    with pytest.raises(ValueError, match="retention_time_s"):
        StorageConfig(retention_time_s=-1)
    with pytest.raises(ValueError, match="read_cache_bytes"):
        StorageConfig(read_cache_bytes="big")
    StorageConfig(sync_policy="never", read_cache_bytes=0)
