"""A clean close lets the compactions of the ledgers it sealed finish
(``ObjectBackend.close_compact_s``): a broker shutting down seals every
ledger it writes, and only it has their bytes (its spill is emptied at
start). Left uncompacted, a ledger of small sections is indexed by its next
opener and a lone cold read of it costs a GET per section (1,000 topics
after a restart: 2,882 against 106,078 entries/s with the wait,
bench/README.md, "A cold read after a clean restart"). Real etcd, real
SeaweedFS."""
from __future__ import annotations

import asyncio
import time

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.object_backend import ObjectBackend

from ...helpers import wait_until
from .test_compaction_spill import append_together, entry, marker, reads_back


def closing_backend(tmp_path, store, objects_url, *, close_compact_s: float, put_budget_per_s: float = 0):
    return ObjectBackend(store, open_object_store(objects_url), commit_interval_ms=1, collect_interval_s=None,
                         profile="latency", layout=3, spill_dir=tmp_path / "spill", spill_max_bytes=64 << 20,
                         put_budget_per_s=put_budget_per_s, close_compact_s=close_compact_s)


async def sealed_ledgers(backend, first_id: int, ledgers: int, commits: int, size: int = 300) -> list[int]:
    """``ledgers`` written together (small sections: indexed if not kept), then sealed."""
    handles = [await backend.create(first_id + i) for i in range(ledgers)]
    for k in range(commits):
        await append_together(backend, handles, lambda lid: entry(lid, k, size))
    await asyncio.gather(*(backend.seal(ml) for ml in handles))
    return [ml.ledger_id for ml in handles]


async def test_a_clean_close_chunks_the_ledgers_it_sealed_before_it_returns(tmp_path, etcd_store, objects_url):
    """Sealed just before the close (their compactions are still waiting for
    the budget): after ``close`` every one has chunks, no index object (the
    whole PUT budget is theirs then: test_object_commit_schedule.py)."""
    backend = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=30, put_budget_per_s=25)
    lids = await sealed_ledgers(backend, 500, ledgers=30, commits=8)
    await backend.close()
    for lid in lids:
        doc = await marker(etcd_store, lid)
        assert doc is not None and "index" not in doc, f"ledger {lid}: {doc}"
    await reads_back(tmp_path, etcd_store, objects_url, lids[0], [entry(lids[0], k, 300) for k in range(8)])


async def test_the_wait_is_bounded_and_what_is_left_reads_back(tmp_path, etcd_store, objects_url):
    """A budget of 4 PUTs/s and 60 ledgers: 0.5 s of close finishes a few,
    the rest is left (no marker) and reads back from the store."""
    backend = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=0.5, put_budget_per_s=4)
    lids = await sealed_ledgers(backend, 600, ledgers=60, commits=3)
    began = time.monotonic()
    await backend.close()
    assert time.monotonic() - began < 6.0  # ~0.5 s, not the ~15 s all of them would take
    left = [lid for lid in lids if await marker(etcd_store, lid) is None]
    assert left, "all were compacted: the bound was not tried"
    await reads_back(tmp_path, etcd_store, objects_url, left[0], [entry(left[0], k, 300) for k in range(3)])


async def test_without_a_wait_a_close_leaves_them_to_the_next_opener(tmp_path, etcd_store, objects_url):
    """``close_compact_s = 0``: the compactions stop with the close."""
    backend = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=0, put_budget_per_s=25)
    lids = await sealed_ledgers(backend, 700, ledgers=10, commits=3)
    await backend.close()
    assert [await marker(etcd_store, lid) for lid in lids] == [None] * len(lids)


async def test_a_ledger_opened_elsewhere_waits_for_its_live_writers_chunks(tmp_path, etcd_store, objects_url):
    """The next owner opens the ledgers (a reader) while their writer is
    still chunking them, held back by its PUT budget: it does not index them
    a second later (the first marker would win, an index object), it waits
    while the writer is alive, and once the writer's close has chunked them
    its handles read the chunks."""
    writer = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=30, put_budget_per_s=2)
    lids = await sealed_ledgers(writer, 800, ledgers=4, commits=3)
    reader = ObjectBackend(etcd_store, open_object_store(objects_url), collect_interval_s=None, layout=3)
    try:
        handles = [await reader.open_sealed(lid, 3) for lid in lids]
        # The writer's background share (0.4 PUTs/s) chunks one of them in the opener's first
        # second or so; before, the opener indexed the others then.
        await wait_until(lambda: marker(etcd_store, lids[0]), what="the writer's first chunked", timeout=15)
        await writer.close()  # the whole budget: 2 a second
        for lid in lids:
            doc = await marker(etcd_store, lid)
            assert doc is not None and "index" not in doc, f"ledger {lid}: {doc}"
        await wait_until(lambda: all(h.compacted for h in handles), what="the opener reads the writer's chunks",
                         timeout=15)
        assert all(key.startswith("ledgers/") for h in handles for key in h.sections.keys)
        got = await reader.read(handles[2], 0, 2, None)
        assert got == [entry(lids[2], k, 300) for k in range(3)]
    finally:
        await reader.close()


async def test_a_dead_writers_ledgers_are_indexed_by_their_opener_without_waiting(tmp_path, etcd_store, objects_url):
    """A writer gone without compacting (here a close that does not wait):
    its ledgers' opener indexes them a second after the load, as before."""
    writer = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=0, put_budget_per_s=2)
    lids = await sealed_ledgers(writer, 900, ledgers=3, commits=3)
    await writer.close()
    reader = ObjectBackend(etcd_store, open_object_store(objects_url), collect_interval_s=None, layout=3)
    try:
        began = time.monotonic()
        [await reader.open_sealed(lid, 3) for lid in lids]
        for lid in lids:
            await wait_until(lambda lid=lid: marker(etcd_store, lid), what="indexed", timeout=15)
            assert "index" in await marker(etcd_store, lid)
        assert time.monotonic() - began < 10  # not the 30 s a live writer gets
    finally:
        await reader.close()


async def test_a_close_does_not_wait_for_ledgers_it_only_opened(tmp_path, etcd_store, objects_url):
    """The opener waits for the live writer; its own close does not wait for
    that (nothing of those ledgers is its to chunk)."""
    writer = closing_backend(tmp_path, etcd_store, objects_url, close_compact_s=0, put_budget_per_s=0.5)
    lids = await sealed_ledgers(writer, 950, ledgers=3, commits=2)
    reader = closing_backend(tmp_path / "reader", etcd_store, objects_url, close_compact_s=30)
    try:
        [await reader.open_sealed(lid, 2) for lid in lids]
        await wait_until(lambda: len(reader.compactions.running) == 3, what="the opener's compactions begun")
        began = time.monotonic()
        await reader.close()
        assert time.monotonic() - began < 10, "the close waited for compactions of ledgers it only opened"
    finally:
        await writer.close()
