"""What a compaction round reads, at 10,000 topics and 1,000 sections per
ledger (issue 41): there a round holds ~1,200 ledgers whose sections are in
~50,000 commit objects of the last ledger's life. Real etcd, real SeaweedFS.

- A ledger its writer sealed with every commit successful, its record
  still at the writer's epoch, is compacted from the sections the writer
  holds: no scan of the writer's commit records to check its index (the
  scan of a round read and decoded every record since its oldest ledger
  began, a third of the broker's loop in the 10-minute bench).
- A round's GETs keep no more bytes than ``keep_bytes``: the objects a
  member asked for are no longer pending for it once asked, not once all of
  its GETs came back (until then every object read stayed kept, up to
  ``KEEP_PENDING_BYTES``, and each GET past ``keep_bytes`` walked them all).
"""
from __future__ import annotations

import asyncio

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.commit_records import COMMITS as COMMITS_ROOT
from magnetar.storage.object.index import ROOT, compacted_key
from tests.helpers import wait_until

from .test_coalesced_reads import COMMITS, TOPICS, CountedStore, _factory, _write, objects_listed


def _count_scans(store, monkeypatch) -> list[str]:
    """The keys ``store.children_records`` is asked for from now on (the
    real etcd store; only counted)."""
    asked: list[str] = []
    real = store.children_records

    async def children_records(key, start="", limit=64):
        asked.append(key)
        return await real(key, start, limit)
    monkeypatch.setattr(store, "children_records", children_records)
    return asked


async def test_ledgers_their_writer_sealed_whole_are_compacted_without_a_scan_of_its_records(
        tmp_path, etcd_store, objects_url, objects, monkeypatch):
    from magnetar.storage.object import compaction_rounds
    monkeypatch.setattr(compaction_rounds, "COMPACT_ROUND_S", 0.5)
    counted = CountedStore(open_object_store(objects_url))
    factory, backend = _factory(tmp_path, etcd_store, counted)
    backend.kept.max_bytes = 0  # no bytes kept by the writer: compacted from the store, in a round
    mls = await _write(factory)
    scans = _count_scans(etcd_store, monkeypatch)
    await asyncio.gather(*(ml.close() for ml in mls))
    await wait_until(objects_listed(objects, "ledgers/", TOPICS), what="every ledger compacted", timeout=30)
    await wait_until(lambda: not backend._compacting, what="compactions over")
    lids = [int(lid) for lid in await etcd_store.children(ROOT) if lid.isdigit()]
    assert len(lids) == TOPICS
    for lid in lids:
        assert await etcd_store.get(compacted_key(lid)) is not None
    assert not [k for k in scans if COMMITS_ROOT in k], scans
    assert counted.gets == COMMITS  # read from the store, one GET per commit object
    await factory.close()
    # Read back by a new owner, from the chunks: every entry.
    factory, _ = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    mls = [await factory.open(f"t/cold-{i}") for i in range(TOPICS)]
    read = await asyncio.gather(*(ml.read_entries(ml.first_position(), 100) for ml in mls))
    assert [[e.data for e in entries] for entries in read] == [
        [f"{i}-{c}".encode() * 50 for c in range(COMMITS)] for i in range(TOPICS)]
    await factory.close()


async def test_a_round_keeps_no_more_bytes_than_keep_bytes(tmp_path, etcd_store, objects_url, objects,
                                                           monkeypatch):
    from magnetar.storage.object import compaction_rounds
    monkeypatch.setattr(compaction_rounds, "COMPACT_ROUND_S", 0.5)
    factory, backend = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    backend.kept.max_bytes = 0
    mls = await _write(factory)
    largest = max(info.size for info in await objects.list("data/"))
    backend.gets.keep_bytes = 2 * largest + 1  # room for about two of the five objects
    await asyncio.gather(*(ml.close() for ml in mls))
    await wait_until(objects_listed(objects, "ledgers/", TOPICS), what="every ledger compacted", timeout=30)
    await wait_until(lambda: not backend._compacting, what="compactions over")
    assert backend.gets.gets == COMMITS
    assert backend.gets._kept_bytes <= backend.gets.keep_bytes, (backend.gets._kept_bytes, largest)
    await factory.close()


async def test_a_rounds_evictions_ask_whether_an_object_is_pending_not_for_its_ranges(
        tmp_path, etcd_store, objects_url, objects, monkeypatch):
    """Past ``keep_bytes`` every GET walks the kept objects to find one no
    compaction waits for. It asks the pending sections whether an object is
    pending; building each object's list of ranges there was 65 % of the
    broker's loop in the 10-minute bench (py-spy). The ranges are asked for
    once per GET, for the object it fetches."""
    from magnetar.storage.object import compaction_rounds
    from magnetar.storage.object.pending_sections import PendingSections
    monkeypatch.setattr(compaction_rounds, "COMPACT_ROUND_S", 0.5)
    asked: list[str] = []
    real = PendingSections.ranges

    def ranges(self, key):  # counted, before the backend binds it
        asked.append(key)
        return real(self, key)
    monkeypatch.setattr(PendingSections, "ranges", ranges)
    factory, backend = _factory(tmp_path, etcd_store, open_object_store(objects_url))
    backend.kept.max_bytes = 0
    mls = await _write(factory)
    largest = max(info.size for info in await objects.list("data/"))
    backend.gets.keep_bytes = 2 * largest + 1  # every GET past the second evicts
    asked.clear()
    await asyncio.gather(*(ml.close() for ml in mls))
    await wait_until(objects_listed(objects, "ledgers/", TOPICS), what="every ledger compacted", timeout=30)
    await wait_until(lambda: not backend._compacting, what="compactions over")
    assert backend.gets.gets == COMMITS
    assert len(asked) <= backend.gets.gets, asked
    await factory.close()
