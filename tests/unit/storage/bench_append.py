"""Append throughput through group commit (not a test; run it by hand).

    .venv/bin/python tests/unit/storage/bench_append.py [--policy always] [--uvloop]

Two caller shapes on one managed ledger with 100-byte entries:
- ``tasks``: N coroutines, each awaiting its own append before the next;
- ``pipelined``: one caller keeping a window of appends in flight with
  done-callbacks (how a connection handler batches publishes).
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig


async def run(policy: str, mode: str, total: int, appenders: int, window: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        factory = ManagedLedgerFactory(Path(tmp), MemoryMetadataStore(), StorageConfig(sync_policy=policy))
        ml = await factory.open("bench")
        data = b"x" * 100
        start = time.perf_counter()
        if mode == "tasks":
            async def appender(n: int) -> None:
                for _ in range(n):
                    await ml.append(data)

            await asyncio.gather(*(appender(total // appenders) for _ in range(appenders)))
        else:
            done = asyncio.Event()
            state = {"inflight": 0, "left": total}

            def completed(_):
                state["inflight"] -= 1
                state["left"] -= 1
                if state["left"] == 0 or state["inflight"] == window // 2:
                    done.set()

            sent = 0
            while sent < total:
                burst = min(window - state["inflight"], total - sent)
                for _ in range(burst):
                    ml.append(data).add_done_callback(completed)
                state["inflight"] += burst
                sent += burst
                done.clear()
                await done.wait()
            while state["left"]:
                done.clear()
                await done.wait()
        elapsed = time.perf_counter() - start
        writer = factory.backend.writer
        rate = total / elapsed
        print(f"{policy:8} {mode:9} {rate:10,.0f} entries/s   fsyncs={writer.fsync_count:6} "
              f"entries/fsync={writer.entries_written / max(1, writer.fsync_count):8.1f}")
        await factory.close()
        return rate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policy", default="always")
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--total", type=int, default=200_000)
    parser.add_argument("--appenders", type=int, default=100)
    parser.add_argument("--window", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        uvloop.install()
    for mode in ("tasks", "pipelined"):
        best = max(asyncio.run(run(args.policy, mode, args.total, args.appenders, args.window))
                   for _ in range(args.repeat))
        print(f"best {mode}: {best:,.0f} entries/s")


if __name__ == "__main__":
    main()
