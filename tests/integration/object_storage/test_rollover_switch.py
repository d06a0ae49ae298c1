"""A rollover onto a ledger created ahead does not hold appends (issue 41):
they are written to the next ledger while the old one is sealed and the
record written, and their receipts wait until the record names it. Real
etcd, real SeaweedFS, the storage layer alone."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig, StorageError
from magnetar.storage.cache import CacheBudget
from magnetar.storage.object import object_ledger
from magnetar.storage.object.index import ledger_key
from magnetar.storage.object.object_backend import ObjectBackend
from tests.helpers import wait_until


def latency_factory(tmp_path, store, objects_url) -> ManagedLedgerFactory:
    cfg = StorageConfig()
    budget = CacheBudget(cfg.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), profile="latency", cache_budget=budget,
                            collect_interval_s=None)
    return ManagedLedgerFactory(tmp_path / "unused", store, cfg, backend=backend, cache_budget=budget)


async def _at_a_blocked_rollover(ml) -> tuple[asyncio.Event, list, list, object]:
    """Append one at a time until the next ledger is prepared and the
    rollover is waiting for its record write (held by the returned event).
    Returns the event, the positions acknowledged so far, the appends not
    acknowledged yet (data, future) and the old ledger."""
    release = asyncio.Event()
    real_save = ml._save
    blocked = asyncio.Event()

    async def held_save(docs, properties, beside=None):
        if ml._appends._rolling:  # the rollover's, not the one naming the ledger prepared ahead
            blocked.set()
            await release.wait()
        return await real_save(docs, properties, beside)

    ml._save = held_save
    old = ml._appends.current
    acked, pending = [], []
    waiting_for_block = asyncio.ensure_future(blocked.wait())
    while not blocked.is_set():
        assert len(acked) < 100, "no rollover"
        data = b"before-%d" % len(acked)
        fut = ml.append(data)
        await asyncio.wait([fut, waiting_for_block], timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if fut.done():
            acked.append(fut.result())
        else:
            pending.append((data, fut))
    assert ml._appends._rolling and ml._appends.current is not old, "appends wait for the rollover"
    return release, acked, pending, old


async def test_appends_go_on_to_the_next_ledger_while_the_rollover_writes_the_record(
        tmp_path, etcd_store, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)  # prepared at 3 sections, full at 6
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    factory = latency_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/switch")
    release, acked, pending, old = await _at_a_blocked_rollover(ml)
    new = ml._appends.current
    pending += [(b"during-%d" % i, ml.append(b"during-%d" % i)) for i in range(3)]
    n = len(pending)
    # Written (PUT and transaction) while the record is still being written...
    await wait_until(lambda: new.entry_count == n, what="the next ledger's entries committed")
    await asyncio.sleep(0.05)
    # ... but no receipt until the record names the ledger.
    assert not any(f.done() for _, f in pending)
    release.set()
    positions = await asyncio.gather(*(f for _, f in pending))
    assert [p.ledger_id for p in positions] == [new.ledger_id] * n
    assert [p.entry_id for p in positions] == list(range(n))
    assert positions[0].ledger_id > old.ledger_id
    got = [e.data for e in await ml.read_entries(ml.first_position(), 1000)]
    assert got == [b"before-%d" % i for i in range(len(acked))] + [data for data, _ in pending]
    await factory.close()


async def test_an_owner_taken_over_while_switched_gives_no_receipt_for_the_next_ledger(
        tmp_path, etcd_server, prefix, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    old_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    new_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    old = latency_factory(tmp_path, old_store, objects_url)
    zombie = await old.open("t/switched-zombie")
    zombie._record.stop_watching()  # it does not hear of the new owner: only the record's compare stops it
    release, acked, pending, _ = await _at_a_blocked_rollover(zombie)
    switched_to = zombie._appends.current
    late = [f for _, f in pending] + [zombie.append(b"late-%d" % i) for i in range(3)]
    await wait_until(lambda: switched_to.entry_count == len(late), what="the zombie's next ledger committed")
    owner = await latency_factory(tmp_path / "new", new_store, objects_url).open("t/switched-zombie")
    release.set()  # the zombie's record write now fails its compare
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results), results
    entries = await owner.read_entries(owner.first_position(), 1000)
    assert [e.position for e in entries] == acked  # everything acknowledged, nothing else
    await owner.append(b"mine")
    old.abandon()
    await owner.close()
    await old_store.close()
    await new_store.close()


async def test_a_closed_managed_ledger_deletes_the_ledger_it_prepared(tmp_path, etcd_store, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    factory = latency_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/prepared")
    while ml._roller.prepared is None:
        await ml.append(b"x")
        await asyncio.sleep(0.01)
        assert ml._appends.current.entry_count < 6, "nothing prepared"
    spare = ml._roller.prepared.meta.ledger_id
    assert await etcd_store.get(ledger_key(spare)) is not None
    await factory.close()
    assert await etcd_store.get(ledger_key(spare)) is None


@pytest.mark.parametrize("appends", [200])
async def test_many_switches_in_a_row_lose_and_reorder_nothing(tmp_path, etcd_store, objects_url, monkeypatch,
                                                              appends):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 4)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    factory = latency_factory(tmp_path, etcd_store, objects_url)
    ml = await factory.open("t/many-switches")
    cursor = await ml.open_cursor("tail", "earliest")
    got: list[bytes] = []

    async def produce() -> list:
        pending = []
        for i in range(appends):
            pending.append(ml.append(b"m%d" % i))
            if i % 4 == 3:
                await pending[-1]  # at least a commit (a section) per 4 appends, whatever the machine's speed
            else:
                await asyncio.sleep(0)
        return await asyncio.gather(*pending)

    async def consume() -> None:
        deadline = asyncio.get_running_loop().time() + 60
        while len(got) < appends and asyncio.get_running_loop().time() < deadline:
            entries = await cursor.read_entries(10)
            got.extend(e.data for e in entries)
            await cursor.delete([e.position for e in entries])
            if not entries:
                await asyncio.sleep(0.005)

    positions, _ = await asyncio.gather(produce(), consume())
    assert len({p.ledger_id for p in positions}) >= 5
    assert positions == sorted(positions)
    assert got == [b"m%d" % i for i in range(appends)]
    await factory.close()
