"""Compaction and cold reads fetch each commit object once for all the
ledgers they need (real etcd, real SeaweedFS; the store's GETs counted).

Eight topics are written together, so each of the five commit objects
holds a section of each of the eight ledgers. Before, compacting them or
reading them cold took one ranged GET per section: 40; now one per
commit object: 5.
"""
from __future__ import annotations

import asyncio

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.object.object_backend import ObjectBackend
from tests.helpers import wait_until

TOPICS, COMMITS = 8, 5


class CountedStore:
    """The real object store, its GETs counted (what the bill would say)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.description = inner.description
        self.gets = 0

    async def get(self, key, start=None, end=None):
        self.gets += 1
        return await self.inner.get(key, start, end)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _factory(tmp_path, store, objects) -> tuple[ManagedLedgerFactory, ObjectBackend]:
    backend = ObjectBackend(store, objects, profile="cost", commit_interval_ms=100, collect_interval_s=None)
    return ManagedLedgerFactory(tmp_path / "unused", store, StorageConfig(), backend=backend), backend


async def _write(factory) -> list:
    mls = [await factory.open(f"t/cold-{i}") for i in range(TOPICS)]
    for c in range(COMMITS):  # one commit per round: cost gathers every topic's entries
        await asyncio.gather(*(ml.append(f"{i}-{c}".encode() * 50) for i, ml in enumerate(mls)))
    return mls


async def test_ledgers_sealed_together_are_compacted_with_one_get_per_commit_object(tmp_path, etcd_store,
                                                                                      objects_url, objects):
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)
    backend.kept.max_bytes = 0  # no bytes kept by the writer: as for ledgers a takeover recovered
    mls = await _write(factory)
    assert backend.committer.puts == COMMITS
    assert len(await objects.list("data/")) == COMMITS
    await asyncio.gather(*(ml.close() for ml in mls))  # sealed together: compacted together
    chunks = await wait_until(objects_listed(objects, "ledgers/", TOPICS), what="every ledger compacted")
    assert len(chunks) == TOPICS
    await wait_until(lambda: not backend._compacting, what="compactions over")
    assert counted.gets == COMMITS, f"{counted.gets} GETs for {COMMITS} commit objects"
    await factory.close()


async def test_ledgers_sealed_apart_are_compacted_in_one_round_with_one_get_per_commit_object(
        tmp_path, etcd_store, objects_url, objects, monkeypatch):
    """Rollovers are spread, so ledgers written together are sealed apart.
    Compacted 50 ms after each seal, each read its own commit objects again
    (here 8 x 5 GETs, no bytes kept between them); gathered into one round,
    they share one GET per commit object."""
    from magnetar.storage.object import compaction_rounds
    monkeypatch.setattr(compaction_rounds, "COMPACT_ROUND_S", 3.0)
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)
    backend.kept.max_bytes = 0  # no bytes kept by the writer: compacted from the store
    backend.gets.keep_bytes = 0  # nor by the reads: a compaction finds nothing another one read
    mls = await _write(factory)
    for ml in mls:  # one after another, further apart than a lockstep gathers
        await ml.close()
        await asyncio.sleep(0.1)
    assert counted.gets == 0 and len(backend.rounds) == TOPICS  # waiting for their round
    chunks = await wait_until(objects_listed(objects, "ledgers/", TOPICS), what="every ledger compacted",
                              timeout=30)
    assert len(chunks) == TOPICS
    await wait_until(lambda: not backend._compacting, what="compactions over")
    assert backend.rounds.rounds == 1
    assert counted.gets == COMMITS, f"{counted.gets} GETs for {COMMITS} commit objects"
    await factory.close()


def objects_listed(objects, prefix: str, count: int):
    async def listed():
        found = await objects.list(prefix)
        return found if len(found) >= count else None
    return listed


async def test_a_cold_read_of_topics_written_together_makes_one_get_per_commit_object(
        tmp_path, etcd_store, objects_url, monkeypatch):
    monkeypatch.setattr(ObjectBackend, "_compact_later", lambda self, ledger: None)  # the commit objects stay read
    factory, _ = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    await _write(factory)
    await factory.close()
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)  # a new owner: nothing cached
    mls = [await factory.open(f"t/cold-{i}") for i in range(TOPICS)]
    assert counted.gets == 0
    read = await asyncio.gather(*(ml.read_entries(ml.first_position(), 100) for ml in mls))
    assert [[e.data for e in entries] for entries in read] == [
        [f"{i}-{c}".encode() * 50 for c in range(COMMITS)] for i in range(TOPICS)]
    assert counted.gets == COMMITS, f"{counted.gets} GETs for {COMMITS} commit objects"
    await factory.close()
