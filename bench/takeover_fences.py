"""A takeover's fences of one dead writer's format-2 ledgers, on a real etcd:
gathered per writer (``together``, what a broker does:
``storage/object/fence_batches.py``) beside one transaction per ledger
(``one-by-one``, what it did before), in one run.

    .venv/bin/python -m bench.takeover_fences [--ledgers 100,256,1000] [--loads 256] [--one-by-one-max 256]

For each count: that many ledger records of one writer (and its writer key)
under a fresh prefix, then every ledger fenced at once through ``--loads``
slots (a broker loads at most ``max_concurrent_topic_loads`` = 256 topics
at a time; a takeover's clients reconnect together). Printed: seconds until
every fence returned, the etcd transactions sent (retries included) and per
ledger. ``one-by-one`` runs only up to ``--one-by-one-max`` ledgers (its
transactions grow with the square of the fences at once). A benchmark, not a
test: figures go to bench/README.md with this command line.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.storage.object import writer_fence
from magnetar.storage.object.fence_batches import FenceBatches
from magnetar.storage.object.index import ledger_key, ledger_layout, ledger_record
from magnetar_harness.etcd import running_etcd

WRITER = "dead-writer"


def fenced_record(value: bytes) -> bytes:
    _, doc = ledger_layout(value)
    return ledger_record("fenced", str(doc["writer"]), layout=2, since=doc.get("from"), fenced_by="bench")


async def one_run(url: str, ledgers: int, loads: int, way: str) -> dict:
    store = await EtcdMetadataStore.open(url)
    try:
        await store.put(writer_fence.writer_key(WRITER), writer_fence.fenced_value([]), -1)
        keys = [ledger_key(i) for i in range(1, ledgers + 1)]
        await asyncio.gather(*(store.put(k, ledger_record("open", WRITER, layout=2, since=1), -1) for k in keys))
        sent = 0
        real = store.transaction

        async def counted(*args, **kwargs):
            nonlocal sent
            sent += 1
            return await real(*args, **kwargs)

        store.transaction = counted
        batches = FenceBatches(store, fenced_record)
        slots = asyncio.Semaphore(loads)

        async def load(key: str) -> bool:
            async with slots:
                if way == "together":
                    return await batches.fence(key, WRITER)
                return await writer_fence.fence_ledger(store, key, WRITER, fenced_record)

        began = time.monotonic()
        answers = await asyncio.gather(*(load(k) for k in keys))
        seconds = time.monotonic() - began
        await batches.close()
        named = writer_fence.fenced_of((await store.get(writer_fence.writer_key(WRITER))).value)
        assert all(answers) and len(named) == ledgers, "a ledger was not fenced"
        return {"way": way, "ledgers": ledgers, "seconds": round(seconds, 3), "transactions": sent,
                "per_ledger": round(sent / ledgers, 2)}
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", default="100,256,1000")
    ap.add_argument("--loads", type=int, default=256)
    ap.add_argument("--one-by-one-max", type=int, default=256)
    args = ap.parse_args()
    rows = []
    with running_etcd(Path(tempfile.mkdtemp(prefix="takeover-fences-"))) as server:
        for n in map(int, args.ledgers.split(",")):
            for way in ("together", "one-by-one"):
                if way == "one-by-one" and n > args.one_by_one_max:
                    continue
                row = asyncio.run(one_run(server.store_url(f"run-{n}-{way}"), n, args.loads, way))
                print(f"  {way:10} {n:6} ledgers: {row['seconds']:8.3f} s  {row['transactions']:7} transactions "
                      f"({row['per_ledger']} per ledger)", flush=True)
                rows.append(row)
    print("| ledgers | way | seconds | transactions | per ledger |")
    print("|---:|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['ledgers']:,} | {row['way']} | {row['seconds']} | {row['transactions']:,} | {row['per_ledger']} |")


if __name__ == "__main__":
    main()
