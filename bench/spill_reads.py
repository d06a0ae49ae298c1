"""What a compaction from the spill costs the event loop, per sealed ledger
(issue 41: at 10,000 written topics ~30 ledgers are sealed a second, each
of up to 1,000 one-entry sections, every one in a different commit object).

    .venv/bin/python -m bench.spill_reads [--ledgers 200] [--sections 750] [--entry 100]

No broker: a :class:`SpilledSections` keeper in a temporary directory,
``--sections`` commit objects each holding a section of one ``--entry``-byte
entry of every one of ``--ledgers`` ledgers (the many-topics shape), then
each ledger taken and read back (``parts()``) as its compaction does.
Printed: the event loop's thread CPU per ledger read (``time.thread_time``
in the loop's thread: the places found, the read handed to a worker and
awaited) and the rest of the process's CPU (the worker's), the best of
``--repeats``.

To time another tree's keeper (the one before, say), run this file by its
path with ``PYTHONPATH=<that tree>``:

    PYTHONPATH=<tree> .venv/bin/python bench/spill_reads.py
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from magnetar.storage.framing import frames
from magnetar.storage.object.index import commit_object, new_section
from magnetar.storage.object.section_columns import SectionColumns
from magnetar.storage.object.spilled_sections import SpilledSections


def spill(keeper: SpilledSections, ledgers: int, sections: int, entry: int) -> list[SimpleNamespace]:
    """The ledgers, each with one section in every commit spilled."""
    columns = {lid: SectionColumns() for lid in range(1, ledgers + 1)}
    for lid in columns:
        keeper.start(lid)
    for seq in range(1, sections + 1):
        key = commit_object("bench", 1_700_000_000_000, seq)
        parts = [frames([(b"%d:%d:" % (lid, seq)).ljust(entry, b".")]) for lid in columns]
        offset = 0
        for (lid, held), framed in zip(columns.items(), parts):
            held.add(seq - 1, 1, key, offset, len(framed))
            offset += len(framed)
        keeper.wrote(key, b"".join(parts))
    return [SimpleNamespace(ledger_id=lid, sections=held, size=held.total_length()) for lid, held in columns.items()]


async def read_all(keeper: SpilledSections, sealed: list) -> tuple[float, float]:
    """Loop-thread CPU and process CPU for reading every ledger, one after another."""
    loop_cpu, cpu = time.thread_time(), time.process_time()
    for ledger in sealed:
        parts = await keeper.take(ledger).parts()
        assert parts is not None and len(parts) == len(ledger.sections)
    return time.thread_time() - loop_cpu, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ledgers", type=int, default=200)
    parser.add_argument("--sections", type=int, default=750)
    parser.add_argument("--entry", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    best = None
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            keeper = SpilledSections(Path(tmp) / "spill", 1 << 34)
            sealed = spill(keeper, args.ledgers, args.sections, args.entry)
            loop_cpu, cpu = asyncio.run(read_all(keeper, sealed))
            keeper.clear()
        if best is None or loop_cpu < best[0]:
            best = (loop_cpu, cpu)
    loop_cpu, cpu = best
    n = args.ledgers
    print(f"{n} ledgers of {args.sections} sections ({args.entry}-byte entries): per ledger, loop thread "
          f"{loop_cpu / n * 1000:.3f} ms CPU, other threads {(cpu - loop_cpu) / n * 1000:.3f} ms CPU "
          f"(best of {args.repeats})")


if __name__ == "__main__":
    main()
