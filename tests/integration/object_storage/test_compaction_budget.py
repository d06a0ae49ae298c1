"""Compaction's chunk PUTs take tokens of the broker's PUT budget, as
commits do (issue 41): the budget bounds every PUT a broker makes. Real
etcd, real SeaweedFS, the storage layer alone."""
from __future__ import annotations

import asyncio
import time

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.cache import CacheBudget
from magnetar.storage.object.index import compacted_key
from magnetar.storage.object.object_backend import ObjectBackend
from tests.helpers import wait_until


class PutTimes:
    """The real store, with the time of each PUT noted (the test's eyes)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.puts: list[tuple[float, str]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def put(self, key, data, **kwargs):
        self.puts.append((time.monotonic(), key))
        return await self.inner.put(key, data, **kwargs)


async def test_chunk_puts_of_ledgers_sealed_together_keep_within_the_put_budget(tmp_path, etcd_store, objects_url):
    rate = 4.0  # PUTs a second; a burst of 1
    objects = PutTimes(open_object_store(objects_url))
    cfg = StorageConfig()
    cache = CacheBudget(cfg.cache_budget_bytes)
    backend = ObjectBackend(etcd_store, objects, profile="latency", put_budget_per_s=rate, cache_budget=cache,
                            collect_interval_s=None)
    factory = ManagedLedgerFactory(tmp_path / "unused", etcd_store, cfg, backend=backend, cache_budget=cache)
    ledgers = [await factory.open(f"t/budget-{i}") for i in range(8)]
    ids = [ml._appends.current.ledger_id for ml in ledgers]
    await asyncio.gather(*(ml.append(b"x" * 100) for ml in ledgers))  # one commit: one section each
    await asyncio.sleep(1.0)  # the bucket full again: what follows is compaction's alone
    began = time.monotonic()
    await asyncio.gather(*(ml.close() for ml in ledgers))  # sealed together: 8 compactions, a chunk each

    async def all_compacted() -> bool:
        return all([await etcd_store.get(compacted_key(lid)) is not None for lid in ids])

    await wait_until(all_compacted, timeout=30, what="the 8 sealed ledgers compacted")
    chunks = [t for t, key in objects.puts if key.startswith("ledgers/") and t >= began]
    assert len(chunks) == 8
    # Within any second, at most the rate plus the burst (and 8 chunk PUTs
    # take at least (8 - 1) / rate seconds); unbudgeted they went in ~0.1 s.
    for t in chunks:
        assert sum(1 for u in chunks if t <= u < t + 1.0) <= rate + 1
    assert chunks[-1] - chunks[0] >= (len(chunks) - 1 - 1) / rate
    await factory.close()
