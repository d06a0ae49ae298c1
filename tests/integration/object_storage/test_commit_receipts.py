"""One commit's receipts for many managed ledgers (real SeaweedFS, real
etcd): every run of appends is told once, complete and in order, after the
commit; a ledger fenced by a new owner in the same commit is told nothing
but its refusal, and the others still get theirs."""
from __future__ import annotations

import asyncio

from magnetar.metadata import EtcdMetadataStore
from magnetar.storage import ManagedLedgerFencedError
from tests.helpers import wait_until

from .test_object_ledgers import open_factory


async def test_one_commit_tells_each_ledger_its_runs_once_complete_and_in_order(tmp_path, etcd_store, objects_url):
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=200)
    ledgers = [await factory.open(f"t/receipts-{i}") for i in range(40)]
    committer = factory.backend.committer
    commits = committer.commits
    told: dict[int, list] = {i: [] for i in range(40)}

    def teller(i):
        return lambda ledger_id, first, count, error: told[i].append((ledger_id, first, count, error))

    expected: dict[int, list] = {}
    futures = []
    for i, ml in enumerate(ledgers):
        tell = teller(i)
        run = i % 3 + 1  # a topic's run: one to three entries
        for _ in range(run):
            ml.append_then(b"x" * 100, tell)
        lid = ml._appends.current_meta.ledger_id
        runs = [[0, run]]
        if i % 5 == 0:  # a future between two runs of the callback
            futures.append((i, run, ml.append(b"f")))
        if i % 7 == 0:
            ml.append_then(b"y", tell)
            if i % 5 == 0:
                runs.append([run + 1, 1])
            else:
                runs[-1][1] += 1  # it follows the run at once: the same run
        expected[i] = [(lid, first, count, None) for first, count in runs]
    positions = await asyncio.gather(*(f for _, _, f in futures))
    await wait_until(lambda: all(len(told[i]) == len(expected[i]) for i in told), what="every run told")
    assert committer.commits == commits + 1  # all of it in one commit
    assert told == expected
    for (i, run, _), position in zip(futures, positions):
        assert (position.ledger_id, position.entry_id) == (expected[i][0][0], run)
    await asyncio.sleep(0.05)
    assert told == expected  # told once: nothing more came
    await factory.close()


async def test_a_ledger_fenced_in_a_commit_gets_no_receipt_and_the_others_do(tmp_path, etcd_server, prefix,
                                                                               objects_url):
    old_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    new_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    old = open_factory(tmp_path, old_store, objects_url, interval_ms=50)
    zombie = await old.open("t/fenced")
    others = [await old.open(f"t/kept-{i}") for i in range(10)]
    acked = await zombie.append(b"before")
    zombie._record.stop_watching()  # it does not hear of the new owner: only the compare stops it
    committer = old.backend.committer
    await wait_until(lambda: not committer._running and not committer._pending, what="the last commit to end")
    new = open_factory(tmp_path / "new", new_store, objects_url)
    await new.backend.fence(acked.ledger_id)  # a takeover's first step (metadata only)
    commits = committer.commits
    told = []
    late = [zombie.append(f"late-{i}".encode()) for i in range(3)]
    for i, ml in enumerate(others):
        tell = (lambda i: lambda lid, first, count, error: told.append((i, first, count, error)))(i)
        for j in range(2):
            ml.append_then(f"{i}-{j}".encode(), tell)
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, ManagedLedgerFencedError) for r in results), results
    await wait_until(lambda: len(told) == len(others), what="the other ledgers' receipts")
    assert committer.commits == commits + 1
    assert told == [(i, 0, 2, None) for i in range(len(others))]  # each run once, whole, in ledger order
    owner = await new.open("t/fenced")
    assert [e.position for e in await owner.read_entries(owner.first_position(), 100)] == [acked]
    old.abandon()
    await new.close()
    await old_store.close()
    await new_store.close()
