"""PUTs and metadata transactions per second of one broker's object storage
writer, with 1 and with N active topics (managed ledgers), on a real etcd
and a real SeaweedFS. The design's promise: at most 1000 /
object_commit_interval_ms PUTs a second per broker, whatever the number of
topics.

    .venv/bin/python bench/object_puts.py --topics 1 1000 --seconds 8 [--watch-all]

The metadata store is opened as a broker opens it, leaving the object index
out of its watch stream; ``--watch-all`` watches everything, as brokers did
before 2026-11-27, to compare the CPU it costs (the figure "CPU ms per 1,000
entries" is this whole process's, etcd client threads included).

Each topic keeps one append in flight. On the shared 2-core machine
(saturated by other work), 2026-11-26: 1 topic 31.9 PUT/s and 31.9
transactions/s; 1000 topics 1.2 PUT/s, 17.8 transactions/s (one per 64
topics of a commit), 1,111 entries/s acknowledged; bound 50/s.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import UNWATCHED_ROOTS, ManagedLedgerFactory, StorageConfig
from magnetar.storage.cache import CacheBudget
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar_harness.etcd import running_etcd
from magnetar_harness.objectstore import running_seaweed


async def measure(etcd_url: str, objects_url: str, topics: int, seconds: float, interval_ms: int,
                  watch_all: bool = False) -> dict:
    store = await EtcdMetadataStore.open(etcd_url, unwatched=() if watch_all else UNWATCHED_ROOTS)
    config = StorageConfig()
    budget = CacheBudget(config.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), commit_interval_ms=interval_ms,
                            cache_budget=budget, collect_interval_s=None)
    factory = ManagedLedgerFactory(Path(tempfile.mkdtemp()), store, config, backend=backend, cache_budget=budget)
    ledgers = await asyncio.gather(*(factory.open(f"bench/t{i}") for i in range(topics)))
    payload = b"x" * 100
    stop = time.monotonic() + seconds
    acked = 0

    async def writer(ml) -> None:  # each topic: one append in flight at a time, all the time
        nonlocal acked
        while time.monotonic() < stop:
            await ml.append(payload)
            acked += 1

    committer = backend.committer
    puts0, txns0, t0, cpu0 = committer.puts, committer.transactions, time.monotonic(), time.process_time()
    await asyncio.gather(*(writer(ml) for ml in ledgers))
    elapsed, cpu = time.monotonic() - t0, time.process_time() - cpu0
    result = {"topics": topics, "puts_per_s": (committer.puts - puts0) / elapsed,
              "transactions_per_s": (committer.transactions - txns0) / elapsed,
              "entries_per_s": acked / elapsed, "bound": 1000 / interval_ms,
              "cpu_ms_per_1000": cpu * 1e6 / max(acked, 1)}
    await factory.close()
    await store.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, nargs="+", default=[1, 1000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval-ms", type=int, default=StorageConfig().object_commit_interval_ms)
    parser.add_argument("--watch-all", action="store_true", help="watch the object index too (the old way)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        with running_etcd(Path(work) / "etcd") as etcd, running_seaweed(Path(work) / "objects") as seaweed:
            for n in args.topics:
                r = asyncio.run(measure(etcd.store_url(f"bench-{n}"), seaweed.store_url(f"bench-{n}"), n,
                                        args.seconds, args.interval_ms, args.watch_all))
                print(f"{r['topics']:>5} topics: {r['puts_per_s']:6.1f} PUT/s, {r['transactions_per_s']:6.1f} "
                      f"transactions/s (bound {r['bound']:.0f}/s), {r['entries_per_s']:,.0f} entries/s acknowledged, "
                      f"{r['cpu_ms_per_1000']:.0f} CPU ms per 1,000 entries")


if __name__ == "__main__":
    main()
