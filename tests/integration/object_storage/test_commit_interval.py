"""The commit interval counts from the first batch's arrival, also when that
batch arrives while the previous commit is still running (a slow PUT): its
wait then overlaps the commit, so a receipt waits for at most one interval
plus the commits in its way, and a broker still makes at most one PUT per
interval. Real SeaweedFS (paused to make a PUT slow) and real etcd."""
from __future__ import annotations

import asyncio
import time

from .test_object_ledgers import open_factory

INTERVAL_MS = 1000


async def test_a_batch_queued_during_a_slow_commit_does_not_wait_a_whole_interval_after_it(
        tmp_path, etcd_store, objects_url, seaweed):
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=INTERVAL_MS)
    ml = await factory.open("t/interval")
    await ml.append(b"warm-up")  # the ledger exists: only commits are timed below
    committer = factory.backend.committer
    seaweed.pause()
    try:
        first = ml.append(b"a")
        # the first commit takes its batch once its interval ends, then its PUT hangs
        deadline = time.monotonic() + 10 * INTERVAL_MS / 1000
        while committer._queue or not committer._pending:
            assert time.monotonic() < deadline, "the first commit never began"
            await asyncio.sleep(0.01)
        assert not first.done()
        second = ml.append(b"b")  # queued while the first commit runs
        # the store stays away for longer than the second batch's interval
        await asyncio.sleep(INTERVAL_MS / 1000 + 0.3)
    finally:
        seaweed.resume()
    await first
    first_done = time.monotonic()
    await second
    gap = time.monotonic() - first_done
    # before: the second commit began gathering only after the first ended (gap >= 1 s)
    assert gap < 0.6 * INTERVAL_MS / 1000, f"the second receipt came {gap:.2f} s after the first"
    assert committer.puts == 3  # warm-up, a, b: one PUT each, none extra
    await factory.close()
