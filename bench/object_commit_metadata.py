"""What a commit's metadata costs etcd per ledger it carries, by the shape
of its transactions (issue 41: 10,000 written topics).

    .venv/bin/python -m bench.object_commit_metadata [--ledgers 1024] [--commits 20] [--repeats 2]

A real etcd (this process's child, at its priority) and the project's etcd
store; no broker, no object store. ``--ledgers`` ledger records are created,
then ``--commits`` commits each carrying every one of them, each commit as
many transactions of 128 ledgers as it takes, run at once (as
``storage/object/commit.py`` does). Shapes, one after the other in each
repeat:

- ``today``: what a commit writes now: per ledger a compare of its record's
  version (the fence) and a put of its section record;
- ``writer-fence``: one compare per transaction (a key per writer that a
  fence would bump) and a put per ledger: what the per-ledger compares cost;
- ``commit-record``: one compare and ONE record per transaction holding
  every ledger's section: what a per-ledger index key costs;
- ``format-2``: what layout format 2 does, through its own code
  (``storage/object/commit_records.record_sections``): the writer's two
  fence compares and one commit record per commit (up to 4,096 ledgers a
  record).

``today`` is layout format 1 (existing ledgers), ``format-2`` what new
ledgers get (docs/object-storage.md, "10,000 topics: where a commit's
metadata goes"); the other two are the shapes measured before it was built.
Printed per shape: wall time per commit and per ledger, and this process's
CPU per commit (building and sending the requests).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.metadata.store import Compare, Put
from magnetar.storage import UNWATCHED_ROOTS
from magnetar.storage.object.commit_records import record_sections
from magnetar.storage.object.index import Section, ledger_key, ledger_record, section_key
from magnetar.storage.object.writer_fence import WriterFence
from magnetar_harness.etcd import running_etcd

PER_TRANSACTION = 128
WRITER = "/object-writers/bench"


def _shapes(section: Section):
    def today(commit: int, ids: list[int]):
        return ([Compare(ledger_key(i), 0) for i in ids], [Put(section_key(i, commit), section.encode()) for i in ids])

    def writer_fence(commit: int, ids: list[int]):
        return [Compare(WRITER, 0)], [Put(section_key(i, commit), section.encode()) for i in ids]

    def commit_record(commit: int, ids: list[int]):
        value = json.dumps([[i, commit, section.count, section.offset, section.length] for i in ids],
                           separators=(",", ":")).encode()
        return [Compare(WRITER, 0)], [Put(f"/object-commits/bench/{commit:012d}-{ids[0]:08d}", value)]

    return {"today": today, "writer-fence": writer_fence, "commit-record": commit_record}


async def measure(url: str, ledgers: int, commits: int, repeats: int, log) -> None:
    store = await EtcdMetadataStore.open(url, unwatched=UNWATCHED_ROOTS)
    try:
        for first in range(0, ledgers, 500):
            await asyncio.gather(*(store.put(ledger_key(i), ledger_record("open", "bench"), -1)
                                   for i in range(first, min(ledgers, first + 500))))
        await store.put(WRITER, b"{}", -1)
        section = Section(0, 1, "data/bench/0000000000000-00000001", 4096, 108)
        chunks = [list(range(i, min(ledgers, i + PER_TRANSACTION))) for i in range(0, ledgers, PER_TRANSACTION)]
        session = await store.create_session(30.0)
        writer = WriterFence("bench-format-2")
        await writer.start(store, session)
        commit = 0
        for repeat in range(repeats):
            for name, shape in [*_shapes(section).items(), ("format-2", None)]:
                cpu, began = time.process_time(), time.monotonic()
                for _ in range(commits):
                    commit += 1
                    if shape is None:
                        sections = {i: Section(commit, 1, section.key, section.offset, section.length)
                                    for i in range(ledgers)}
                        done, fenced = await record_sections(store, writer, sections)
                        assert len(done) == ledgers and not fenced
                        continue
                    await asyncio.gather(*(store.transaction(*shape(commit, ids), versions=False) for ids in chunks))
                wall, cpu = time.monotonic() - began, time.process_time() - cpu
                per = len(chunks) if shape is not None else -(-ledgers // 4096)
                log(f"  repeat {repeat}, {name:>13}: {per} transactions per commit of {ledgers:,} ledgers: "
                    f"{wall / commits * 1e3:.1f} ms per commit, {wall / (commits * ledgers) * 1e6:.1f} us per "
                    f"ledger; this process's CPU {cpu / commits * 1e3:.1f} ms per commit | "
                    f"load {os.getloadavg()[0]:.1f}")
    finally:
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ledgers", type=int, default=1024)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    log = lambda line: print(line, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory() as work:
        with running_etcd(Path(work) / "etcd") as etcd:
            log(f"load {os.getloadavg()[0]:.1f}")
            asyncio.run(measure(etcd.store_url("commit-metadata"), args.ledgers, args.commits, args.repeats, log))


if __name__ == "__main__":
    main()
