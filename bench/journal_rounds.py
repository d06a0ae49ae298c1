"""The file backend's write path alone, many ledgers: how long an entry takes
from ``submit`` to its completion (durable under ``sync_policy = "always"``),
with variants of the journal beside each other in one run (issue 41).

    .venv/bin/python -m bench.journal_rounds [--ledgers 1000] [--rate 5000] [--seconds 20]
                                             [--variants room,no-room] [--repeats 1] [--loop-busy 0.6]
                                             [--json PATH]
    .venv/bin/python -m bench.journal_rounds --fsyncs [--seconds 4] [--repeats 3]

``--fsyncs``: one fdatasync after each 700-byte record in a loop, records
appended past a file's end (``append``) beside records written over zeros
made and synced ahead (``room``, what :mod:`magnetar.storage.file.journal_room`
does), in turns: syncs done and their p50 / p99 / max.

No broker, no client, no socket: a :class:`FileBackend` on a fresh
directory, one event loop submitting 100-byte entries round-robin over
``--ledgers`` ledgers at ``--rate`` entries/s for ``--seconds``, each
entry its own batch (what unbatched producers on as many topics make).
With ``--loop-busy SHARE`` the loop spends that share of each millisecond
in Python (holding the GIL), as a broker's loop busy with the traffic
does, so the writer thread's syscalls wait to get the GIL back.
Variants (alternating which goes first per repeat):

- ``room``: this tree's journal (its files zero-filled ahead of the records);
- ``no-room``: the same without zero-filling (every record grows the file);
- ``segments``: ``journal = false`` (an fdatasync per segment file written).

Reported per run: latency p50 / p99 / max, fsyncs/s, group commits/s,
checkpoints, the load average; and the times where entries took more than
10 ms (to see whether a tail is periodic, e.g. each checkpoint). A
benchmark, not a test: figures go to bench/README.md with this command.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from magnetar.storage.config import StorageConfig
from magnetar.storage.file import journal as journal_module
from magnetar.storage.file.file_backend import FileBackend

VARIANTS = ("room", "no-room", "segments")


async def one_run(variant: str, args) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"journal-rounds-{variant}-"))
    defaults = journal_module.Journal.__init__.__defaults__
    if variant == "no-room":
        journal_module.Journal.__init__.__defaults__ = (*defaults[:-1], 0)
    try:
        config = StorageConfig(sync_policy="always", journal=variant != "segments",
                               journal_checkpoint_interval_ms=args.checkpoint_ms)
        backend = FileBackend(work, config)
    finally:
        journal_module.Journal.__init__.__defaults__ = defaults
    try:
        ledgers = [await backend.create(i + 1) for i in range(args.ledgers)]
        loop = asyncio.get_running_loop()
        samples: list[tuple[float, float]] = []
        data = b"x" * 100

        def completion(t0: float):
            return lambda error: samples.append((t0, loop.time() - t0))

        before = backend.stats().counters
        load_before = os.getloadavg()[0]
        start = loop.time()
        sent = turn = 0
        while (now := loop.time()) - start < args.seconds:
            for _ in range(int((now - start) * args.rate) - sent):
                backend.submit(ledgers[turn], [data], completion(loop.time()), loop)
                turn = turn + 1 if turn + 1 < len(ledgers) else 0
                sent += 1
            if args.loop_busy:
                # The broker's event loop is busy with the same traffic: it
                # holds the GIL in Python for this share of each millisecond.
                spin_until = time.perf_counter() + args.loop_busy / 1000
                while time.perf_counter() < spin_until:
                    pass
                await asyncio.sleep((1 - args.loop_busy) / 1000)
            else:
                await asyncio.sleep(0.0005)
        elapsed = loop.time() - start
        while len(samples) < sent:
            await asyncio.sleep(0.01)
        after = backend.stats().counters
    finally:
        await backend.close()
        shutil.rmtree(work, ignore_errors=True)
    latencies = sorted(s[1] * 1e3 for s in samples)
    n = len(latencies)
    slow = sorted((round(t - start, 2), round(x * 1e3, 1)) for t, x in samples if x > 0.010)
    figures = {"variant": variant, "ledgers": args.ledgers, "entries": n,
               "p50_ms": round(latencies[n // 2], 2), "p99_ms": round(latencies[int(n * 0.99)], 2),
               "max_ms": round(latencies[-1], 1),
               "fsyncs_per_s": round((after["fsyncs"] - before["fsyncs"]) / elapsed, 1),
               "group_commits_per_s": round((after["group_commits"] - before["group_commits"]) / elapsed, 1),
               "checkpoints": after.get("checkpoints", 0) - before.get("checkpoints", 0),
               "slow_over_10ms": _clusters(slow),
               "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    return figures


def fsync_turn(mode: str, seconds: float) -> dict:
    """One turn of ``--fsyncs`` (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix="journal-rounds-fsync-"))
    fd = os.open(work / "j", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if mode == "room":
            zeros = bytes(1 << 20)
            for i in range(16):
                os.pwrite(fd, zeros, i << 20)
            os.fsync(fd)
        latencies, offset, record = [], 0, b"r" * 700
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.pwrite(fd, record, offset)
            offset += len(record)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            latencies.append((time.perf_counter() - t0) * 1e3)
    finally:
        os.close(fd)
        shutil.rmtree(work, ignore_errors=True)
    latencies.sort()
    n = len(latencies)
    return {"mode": mode, "syncs": n, "p50_ms": round(latencies[n // 2], 3),
            "p99_ms": round(latencies[int(n * 0.99)], 2), "max_ms": round(latencies[-1], 1),
            "load_average": round(os.getloadavg()[0], 1)}


def _clusters(slow: list[tuple[float, float]]) -> list[list]:
    """Entries over 10 ms grouped into bursts: [from s, to s, entries, max ms]."""
    out: list[list] = []
    for t, ms in slow:
        if out and t - out[-1][1] < 0.2:
            out[-1][1], out[-1][2], out[-1][3] = t, out[-1][2] + 1, max(out[-1][3], ms)
        else:
            out.append([t, t, 1, ms])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledgers", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=5000.0, help="entries/s over all ledgers")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--checkpoint-ms", type=int, default=10_000)
    ap.add_argument("--variants", default="room,no-room")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--loop-busy", type=float, default=0.0, metavar="SHARE",
                    help="share of each millisecond the event loop spends in Python (0..1), as a broker's "
                         "loop busy with the traffic does: the writer thread waits for the GIL behind it")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--fsyncs", action="store_true", help="compare single fdatasyncs: append against room")
    args = ap.parse_args()
    if args.fsyncs:
        turns = [fsync_turn(mode, min(args.seconds, 10.0)) for _ in range(args.repeats) for mode in ("append", "room")]
        for t in turns:
            print(f"  {t['mode']:6} syncs {t['syncs']}  p50 {t['p50_ms']} p99 {t['p99_ms']} max {t['max_ms']} ms  "
                  f"load {t['load_average']}")
        for mode in ("append", "room"):
            mine = [t for t in turns if t["mode"] == mode]
            print(f"| {mode} | median syncs {statistics.median(t['syncs'] for t in mine):.0f} | p50 "
                  f"{statistics.median(t['p50_ms'] for t in mine)} ms | p99 {statistics.median(t['p99_ms'] for t in mine)} ms |")
        return
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r} (one of {', '.join(VARIANTS)})")
    runs = []
    for repeat in range(args.repeats):
        for variant in (variants if repeat % 2 == 0 else list(reversed(variants))):
            figures = asyncio.run(one_run(variant, args))
            runs.append(figures)
            print(f"  {variant:9} {args.ledgers} ledgers: p50 {figures['p50_ms']} p99 {figures['p99_ms']} "
                  f"max {figures['max_ms']} ms  fsyncs/s {figures['fsyncs_per_s']}  group commits/s "
                  f"{figures['group_commits_per_s']}  checkpoints {figures['checkpoints']}  "
                  f"load {figures['load_average']}  over 10 ms: {figures['slow_over_10ms'][:8]}",
                  file=sys.stderr, flush=True)
    print("| variant | p50 ms | p99 ms | max ms | fsyncs/s | load avg |")
    print("|---|---:|---:|---:|---:|---|")
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        med = {k: round(statistics.median(r[k] for r in mine), 2) for k in ("p50_ms", "p99_ms", "max_ms",
                                                                             "fsyncs_per_s")}
        loads = [r["load_average"][0] for r in mine]
        print(f"| {variant} | {med['p50_ms']} | {med['p99_ms']} | {med['max_ms']} | {med['fsyncs_per_s']} | "
              f"{min(loads):.1f}-{max(loads):.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "started": time.time(), "runs": runs},
                                        indent=2) + "\n")


if __name__ == "__main__":
    main()
