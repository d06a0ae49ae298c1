"""The markers of ledgers compacted into index objects about the same time
share metadata transactions (:mod:`magnetar.storage.object.marker_batches`;
issue 41: ~32 seals a second at 10,000 topics, a marker transaction each,
while etcd's transactions bounded the commits). Real etcd, real SeaweedFS;
the transactions counted by the harness's tap in front of etcd. Each test
fails without the feature: one marker transaction per ledger.
"""
from __future__ import annotations

import asyncio

from magnetar.metadata.store import Compare, Put
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.index import compacted_key, ledger_key
from magnetar.storage.object.marker_batches import MARKERS_PER_TRANSACTION
from magnetar_harness.read_tap import ReadTap

from ...helpers import wait_until
from .test_coalesced_reads import objects_listed
from .test_indexed_compaction import append, backend_on, entry, read_all


def marker_transactions(tap: ReadTap) -> list[tuple[str, ...]]:
    """The keys of each transaction that wrote a marker, in order."""
    return [keys for kind, *rest in tap.writes if kind == "transaction"
            for keys in rest if any(k.endswith("/compacted") for k in keys)]


async def written_together(backend, count: int, commits: int = 2, first_id: int = 100) -> list:
    ledgers = [await backend.create(first_id + i) for i in range(count)]
    for k in range(commits):
        await asyncio.gather(*(append(backend, ml, entry(ml.ledger_id, k)) for ml in ledgers))
    return ledgers


async def test_ledgers_indexed_together_share_their_marker_transactions(etcd_store, objects_url, objects):
    count = MARKERS_PER_TRANSACTION + 6  # more than one transaction holds
    tap = ReadTap(etcd_store)
    writer = backend_on(tap, open_object_store(objects_url))
    try:
        ledgers = await written_together(writer, count)
        for ml in ledgers:
            await writer.seal(ml)
        for ml in ledgers:
            await wait_until(lambda lid=ml.ledger_id: etcd_store.exists(compacted_key(lid)), what="marked",
                             timeout=30)
        await wait_until(lambda: not writer._compacting, what="compactions over")
    finally:
        await writer.close()
    batches = marker_transactions(tap)
    # One transaction per ledger before; now a handful, none past etcd's 128 compares.
    assert 2 <= len(batches) <= count // 5, [len(b) for b in batches]
    assert max(len(b) for b in batches) <= MARKERS_PER_TRANSACTION
    assert sorted(k for b in batches for k in b) == sorted(compacted_key(ml.ledger_id) for ml in ledgers)
    reader = backend_on(etcd_store, open_object_store(objects_url))
    try:
        for ml in ledgers[::17]:
            found = await reader.open_sealed(ml.ledger_id, 2)
            assert found.compacted and await read_all(reader, found) == [entry(ml.ledger_id, k) for k in range(2)]
    finally:
        await reader.close()


class HeldMarkers(ReadTap):
    """The tap, holding the first marker transaction until ``release`` is
    set (a transaction in flight while the other markers queue)."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.release = asyncio.Event()
        self.held: tuple[str, ...] | None = None

    async def transaction(self, compares, writes, *, versions=True):
        keys = tuple(w.key for w in writes)
        if self.held is None and any(k.endswith("/compacted") for k in keys):
            self.held = keys
            await self.release.wait()
        return await super().transaction(compares, writes, versions=versions)


async def test_a_ledger_fenced_or_deleted_in_a_batch_leaves_the_others_marked(etcd_store, objects_url, objects):
    count = 10
    tap = HeldMarkers(etcd_store)
    writer = backend_on(tap, open_object_store(objects_url))
    other = backend_on(etcd_store, open_object_store(objects_url))
    markers = writer.compactions.markers
    try:
        ledgers = await written_together(writer, count)
        # A marker transaction in flight (held by the tap) while the ledgers are sealed: theirs all queue.
        in_flight = asyncio.ensure_future(markers.write([Compare(compacted_key(9999), -1)],
                                                        Put(compacted_key(9999), b"{}")))
        await wait_until(lambda: tap.held is not None, what="the first marker transaction")
        for ml in ledgers:
            await writer.seal(ml)
        await wait_until(objects_listed(objects, "ledgers/", count), what="the index objects written", timeout=30)
        await wait_until(lambda: markers.queued == count, what="the markers queued")
        lids = [ml.ledger_id for ml in ledgers]
        fenced, deleted = lids[2], lids[5]
        await other.fence(fenced)
        await other.delete(deleted)
        tap.release.set()
        await in_flight
        await wait_until(lambda: not writer._compacting, what="compactions over", timeout=30)
        marked = {ml.ledger_id for ml in ledgers if await etcd_store.exists(compacted_key(ml.ledger_id))}
        assert marked == {ml.ledger_id for ml in ledgers} - {fenced, deleted}
        assert not await etcd_store.exists(ledger_key(deleted))
        batches = marker_transactions(tap)
        # the held one, the batch the two failed, the batch again without them
        assert [len(b) for b in batches] == [1, count, count - 2]
        assert compacted_key(fenced) in batches[1] and compacted_key(fenced) not in batches[2]
        # The fenced ledger is the new owner's to compact: it reads it whole.
        found = await other.recover(fenced)
        assert await read_all(other, found) == [entry(fenced, k) for k in range(2)]
        await wait_until(lambda: etcd_store.exists(compacted_key(fenced)), what="compacted by the new owner",
                         timeout=30)
    finally:
        tap.release.set()
        await writer.close()
        await other.close()
