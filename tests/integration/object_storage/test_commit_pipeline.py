"""The commit pipeline: the PUT of the next commit overlaps the transaction
of the one before, and stays honest. Real SeaweedFS and real etcd, each
paused (SIGSTOP) to hold one stage of a commit."""
from __future__ import annotations

import asyncio

from magnetar.metadata import EtcdMetadataStore
from magnetar.storage import ManagedLedgerFencedError
from tests.helpers import wait_until

from .test_object_ledgers import open_factory


async def test_the_next_commit_writes_its_object_while_the_previous_transaction_hangs(
        tmp_path, etcd_store, etcd_server, objects_url):
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=50)
    ml = await factory.open("t/pipelined")
    await ml.append(b"warm-up")
    committer = factory.backend.committer
    puts = committer.puts
    etcd_server.pause()  # transactions hang; PUTs do not
    try:
        first = asyncio.ensure_future(ml.append(b"a"))
        await wait_until(lambda: committer.puts == puts + 1, what="the first commit's PUT")
        second = asyncio.ensure_future(ml.append(b"b"))
        # before: one commit at a time, so this PUT waited for the first transaction
        await wait_until(lambda: committer.puts == puts + 2, timeout=5, what="the second commit's PUT")
        assert not first.done() and not second.done()  # no receipt before its transaction
    finally:
        etcd_server.resume()
    a, b = await first, await second
    assert (a.ledger_id, a.entry_id + 1) == (b.ledger_id, b.entry_id)  # in order, no gap
    assert [e.data for e in await ml.read_entries(ml.first_position(), 10)] == [b"warm-up", b"a", b"b"]
    await factory.close()


async def test_a_fenced_owner_with_two_commits_in_its_pipeline_gives_no_receipt_for_either(
        tmp_path, etcd_server, prefix, seaweed, objects_url):
    old_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    new_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    old = open_factory(tmp_path, old_store, objects_url, interval_ms=50)
    zombie = await old.open("t/zombie")
    acked = [await zombie.append(f"a{i}".encode()) for i in range(3)]
    zombie._record.stop_watching()  # it does not hear of the new owner: only the compare stops it
    committer = old.backend.committer
    transactions, chained, retries = committer.transactions, committer.chained, committer.chain_retries
    new = open_factory(tmp_path / "new", new_store, objects_url)
    await wait_until(lambda: not committer._running and not committer._pending, what="the last receipt's commit to end")
    seaweed.pause()  # both commits' PUTs hang: both are in the pipeline at once
    try:
        late = [asyncio.ensure_future(zombie.append(b"late-1"))]
        await wait_until(lambda: len(committer._running) == 1 and not committer._queue, what="the first commit")
        late.append(asyncio.ensure_future(zombie.append(b"late-2")))
        await wait_until(lambda: len(committer._running) == 2 and not committer._queue, what="the second commit")
        await new.backend.fence(acked[0].ledger_id)  # a takeover's first step (metadata only)
    finally:
        seaweed.resume()
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, ManagedLedgerFencedError) for r in results), results
    # the first commit's compare failed; the second either was chained on the
    # first's record and failed its compare too, or waited for the first to
    # end; either way its ledger was then refused without another try
    chained = committer.chained - chained
    assert chained in (0, 1)
    assert committer.transactions == transactions + 1 + chained
    assert committer.chain_retries == retries + chained
    owner = await new.open("t/zombie")
    entries = await owner.read_entries(owner.first_position(), 100)
    assert [e.position for e in entries] == acked  # everything acknowledged, nothing else
    old.abandon()
    await new.close()
    await old_store.close()
    await new_store.close()

