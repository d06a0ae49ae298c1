"""A takeover's reads of the dead writer's commit records, on a real etcd:
every one of its format-2 ledgers recovered through one broker's
``RecordScans`` (``storage/object/commit_records.py``), as the loads of a
takeover come.

    .venv/bin/python -m bench.takeover_scans [--ledgers 1000,10000] [--sections 20] [--per-record 400] [--loads 256]

For each count: a writer's commit records naming ``--sections`` sections of
each of ``--ledgers`` ledgers, ``--per-record`` ledgers a record (a commit
carries the ledgers written since the last: 20,000 msg/s over 10,000
topics at ~50 commits a second is ~400), then every ledger's sections asked
of one ``RecordScans`` through ``--loads`` slots (a broker loads at most
``max_concurrent_topic_loads`` = 256 topics at a time). Printed: seconds
until every recovery had its sections, the scans run, the records and bytes
read from etcd, against the records there. A benchmark, not a test: figures
go to bench/README.md with this command line.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.metadata.store import Put
from magnetar.storage.object import commit_records
from magnetar.storage.object.commit_records import RecordScans, encode_row, encode_rows, record_key
from magnetar_harness.etcd import running_etcd

WRITER = "dead-writer"


async def write_records(store, ledgers: int, sections: int, per_record: int) -> tuple[int, int]:
    """The writer's records: ledger after ledger, ``per_record`` of them per
    record, until each has ``sections`` sections. Returns (records, bytes)."""
    seq, total, puts = 0, 0, []
    for n in range(sections):
        for first in range(1, ledgers + 1, per_record):
            seq += 1
            ids = range(first, min(ledgers + 1, first + per_record))
            value = encode_rows(f"data/c/{seq}", [encode_row(lid, n, 1, 100 * i, 100) for i, lid in enumerate(ids)])
            total += len(value)
            puts.append(Put(record_key(WRITER, seq), value))
    for i in range(0, len(puts), 64):
        await store.transaction([], puts[i:i + 64])
    return seq, total


async def one_run(url: str, ledgers: int, sections: int, per_record: int, loads: int) -> dict:
    store = await EtcdMetadataStore.open(url)
    try:
        records, stored = await write_records(store, ledgers, sections, per_record)
        read = {"records": 0, "bytes": 0, "scans": 0}
        real_children = store.children_records

        async def counted(*args, **kwargs):
            page = await real_children(*args, **kwargs)
            read["records"] += len(page)
            read["bytes"] += sum(len(r.value) for r in page)
            return page

        store.children_records = counted
        real_read = commit_records.read_records

        async def counted_scan(*args, **kwargs):
            read["scans"] += 1
            return await real_read(*args, **kwargs)

        commit_records.read_records = counted_scan
        scans = RecordScans(store)
        slots = asyncio.Semaphore(loads)

        async def recover(lid: int) -> int:
            async with slots:
                return len(await scans.sections(WRITER, 1, lid))

        began = time.monotonic()
        found = await asyncio.gather(*(recover(lid) for lid in range(1, ledgers + 1)))
        seconds = time.monotonic() - began
        commit_records.read_records = real_read
        assert found == [sections] * ledgers, "a recovery missed sections"
        return {"ledgers": ledgers, "seconds": round(seconds, 2), "scans": read["scans"],
                "records_there": records, "mb_there": round(stored / 1e6, 1),
                "records_read": read["records"], "mb_read": round(read["bytes"] / 1e6, 1)}
    finally:
        await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", default="1000,10000")
    ap.add_argument("--sections", type=int, default=20, help="sections of each ledger in the records")
    ap.add_argument("--per-record", type=int, default=400, help="ledgers named by each record")
    ap.add_argument("--loads", type=int, default=256)
    args = ap.parse_args()
    rows = []
    with running_etcd(Path(tempfile.mkdtemp(prefix="takeover-scans-"))) as server:
        for n in map(int, args.ledgers.split(",")):
            row = asyncio.run(one_run(server.store_url(f"run-{n}"), n, args.sections, args.per_record, args.loads))
            print(f"  {n:6} ledgers: {row['seconds']:8.2f} s  {row['scans']} scans, read {row['records_read']:,} "
                  f"records ({row['mb_read']} MB) of {row['records_there']:,} ({row['mb_there']} MB)", flush=True)
            rows.append(row)
    print("| ledgers | sections each | seconds | scans | records read (MB) | records there (MB) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['ledgers']:,} | {args.sections} | {row['seconds']} | {row['scans']} | "
              f"{row['records_read']:,} ({row['mb_read']}) | {row['records_there']:,} ({row['mb_there']}) |")


if __name__ == "__main__":
    main()
