"""etcd calls of the collector's commit-record sweep, per pass (issue 41: at
10,000 topics a pass meets tens of thousands of commit records, and each
call competes with the commits' own transactions).

    .venv/bin/python -m bench.sweep_calls [--records 300] [--ledgers 3000] [--each 200] [--passes 2] [--young 0]

A real etcd (this process's child), no broker: ``--ledgers`` ledger records,
half of them (at random, seeded) with a ``compacted`` marker, and
``--records`` commit records of one writer naming ``--each`` of them
(``--each 1``: record i names ledger i, every other one compacted). Then
``--passes`` passes of ``sweep_records`` through one counting wrapper
(magnetar_harness/read_tap.py, as a broker's collector keeps one store);
printed per pass: reads (of them, reads under ``/object-ledgers``: the
ledgers' listing and markers), writes by kind, and the pass's time (wall
clock, and this process's CPU: etcd is a child, not counted).

``--young SHARE``: the last SHARE of the records name objects written
now, the others objects an hour old, and the passes are the collector's
(``young_s`` its age bound, ``COLLECT_AFTER_S``): at 10,000 written
topics nearly every record is younger than that. A tree whose sweep
takes no ``young_s`` is passed none.

To count another tree's sweep (the one before, say), run this file by its
path with ``PYTHONPATH=<that tree>`` (``-m`` would put this tree first):

    PYTHONPATH=<tree> .venv/bin/python bench/sweep_calls.py

It uses only ``sweep_records`` and the record format.
"""
from __future__ import annotations

import argparse
import asyncio
import inspect
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore, Put
from magnetar.storage.object.commit_records import encode_record, record_key, sweep_records
from magnetar.storage.object.compactor import COLLECT_AFTER_S
from magnetar.storage.object.index import ROOT, commit_object, compacted_key, new_section
from magnetar_harness.etcd import running_etcd
from magnetar_harness.read_tap import ReadTap


async def fill(store, records: int, ledgers: int, each: int, rnd: random.Random, young: float = 0.0) -> None:
    ids = list(range(1, ledgers + 1))
    compacted = ids[::2] if each == 1 else [lid for lid in ids if rnd.random() < 0.5]
    writes = [Put(f"{ROOT}/{lid:020d}", b"{}") for lid in ids] + [Put(compacted_key(lid), b"{}") for lid in compacted]
    for i in range(0, len(writes), 100):
        await store.transaction([], writes[i:i + 100])
    for seq in range(records):
        now_ms = int(time.time() * 1000)
        okey = commit_object("w", now_ms if seq >= records * (1 - young) else now_ms - 3_600_000, seq)
        named = [ids[seq % ledgers]] if each == 1 else sorted(rnd.sample(ids, each))
        await store.put(record_key("w", seq), encode_record(okey, [(lid, new_section(0, 1, okey, 0, 1))
                                                                   for lid in named]))


async def run(args) -> None:
    with tempfile.TemporaryDirectory() as tmp, running_etcd(Path(tmp)) as etcd:
        async with await EtcdMetadataStore.open(etcd.store_url("sweep")) as store:
            await fill(store, args.records, args.ledgers, args.each, random.Random(1), args.young)
            tap = ReadTap(store)
            aged = {"young_s": COLLECT_AFTER_S} if "young_s" in inspect.signature(sweep_records).parameters else {}
            for n in range(1, args.passes + 1):
                tap.reads, tap.read_keys, tap.writes = 0, [], []
                began, cpu = time.perf_counter(), time.process_time()
                await sweep_records(tap, **aged)
                took, cpu = time.perf_counter() - began, time.process_time() - cpu
                ledger_reads = sum(1 for k in tap.read_keys if k.startswith(ROOT))
                kinds = dict(Counter(w[0] for w in tap.writes))
                print(f"pass {n}: reads {tap.reads} ({ledger_reads} under {ROOT}), writes {len(tap.writes)} {kinds}, "
                      f"{took * 1000:.0f} ms, CPU {cpu * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--ledgers", type=int, default=3000)
    parser.add_argument("--each", type=int, default=200)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--young", type=float, default=0.0, metavar="SHARE",
                        help="the share of records naming objects written now (the rest: an hour ago)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
