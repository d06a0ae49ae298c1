"""etcd transactions per sealed ledger of small sections, by what they write
(issue 41: at 10,000 topics the rollover regime seals ~32 ledgers a second,
and each indexed ledger's ``compacted`` marker was a transaction of its own).

    .venv/bin/python -m bench.marker_transactions [--ledgers 320] [--commits 3] [--seal-rate 32]

A real etcd and SeaweedFS (this process's children), the object backend
(layout 3, no bytes kept: compacted from the store into index objects, as
most ledgers at 10,000 topics), no broker. ``--ledgers`` ledgers are
written together (``--commits`` commits carrying each), then sealed
``--seal-rate`` a second, evenly, as spread rollovers seal them; once every
one is marked, the transactions sent to etcd since the first seal are
counted by what they wrote (a wrapper of the store counting its
``transaction`` calls; retries count): ``marker`` (a ``compacted`` key),
``commit`` and ``other``; printed per sealed ledger.

To count a tree without the shared marker transactions, run a copy with
``PYTHONPATH=<that tree>``: it uses only the backend's public seams.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.index import compacted_key
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar_harness.etcd import running_etcd
from magnetar_harness.objectstore import running_seaweed


class Counted:
    """``inner`` with its transactions counted by kind (every call goes on to it)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()
        self.counting = False

    async def transaction(self, compares, writes, *, versions=True):
        if self.counting:
            keys = [w.key for w in writes]
            kind = ("marker" if any(k.endswith("/compacted") for k in keys)
                    else "commit" if any("/object-commits/" in k or "/s/" in k for k in keys) else "other")
            self.counts[kind] += 1
        return await self.inner.transaction(compares, writes, versions=versions)

    def __getattr__(self, name):
        return getattr(self.inner, name)


async def _append(backend, ledger, data: bytes) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    backend.submit(ledger, [data], done.set_result, loop)
    error = await done
    if error is not None:
        raise error


async def run(etcd_url: str, objects_url: str, ledgers: int, commits: int, seal_rate: float) -> dict:
    store = await EtcdMetadataStore.open(etcd_url)
    counted = Counted(store)
    backend = ObjectBackend(counted, open_object_store(objects_url), commit_interval_ms=1,
                            collect_interval_s=None, profile="latency", layout=3)
    backend.kept.max_bytes = 0
    try:
        handles = [await backend.create(1000 + i) for i in range(ledgers)]
        for k in range(commits):
            await asyncio.gather(*(_append(backend, h, b"x" * 100) for h in handles))
        counted.counting = True
        began = time.monotonic()
        for i, h in enumerate(handles):
            await asyncio.sleep(max(0.0, began + i / seal_rate - time.monotonic()))
            await backend.seal(h)
        deadline = time.monotonic() + 60
        pending = {h.ledger_id for h in handles}
        while pending and time.monotonic() < deadline:
            ordered = sorted(pending)
            marked = await asyncio.gather(*(store.exists(compacted_key(lid)) for lid in ordered))
            pending = {lid for lid, m in zip(ordered, marked) if not m}
            await asyncio.sleep(0.1)
        seconds = time.monotonic() - began
    finally:
        await backend.close()
        await store.close()
    return {"unmarked": len(pending), "seconds": seconds, **counted.counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=320)
    parser.add_argument("--commits", type=int, default=3)
    parser.add_argument("--seal-rate", type=float, default=32.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="marker-txns-") as tmp, \
            running_etcd(Path(tmp) / "etcd") as etcd, running_seaweed(Path(tmp) / "weed") as weed:
        out = asyncio.run(run(etcd.store_url("bench"), weed.store_url("bench"), args.ledgers, args.commits,
                              args.seal_rate))
    n = args.ledgers
    print(f"{n} ledgers sealed at {args.seal_rate:g}/s, all marked in {out['seconds']:.1f} s "
          f"({out['unmarked']} unmarked)")
    for kind in ("marker", "commit", "other"):
        print(f"  {kind:7} transactions: {out.get(kind, 0):5d}  per sealed ledger {out.get(kind, 0) / n:.3f}")


if __name__ == "__main__":
    main()
