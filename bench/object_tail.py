"""Where a lone ``latency`` topic's publish tail comes from, on the storage
layer alone (issue 41): one managed ledger on the object backend, a real
etcd and a real SeaweedFS, appends at a fixed rate, each timed from the
call to its receipt. No broker, no client: what is left is the storage's.

    .venv/bin/python -m bench.object_tail [--seconds 10] [--rate 1000] [--budget 250] [--repeats 2]

Printed per run: append latency p50/p99/max; the same for the appends
issued while the managed ledger was rolling over (those a rollover holds)
and for the others; the rollovers (how many, how long each held appends);
the PUT budget's waits; the commit phases (``put``: the PUT, ``transaction``:
the etcd transaction, ``gather``: arrival to the commit taking the batch,
budget and pipeline waits included) as mean and p99 bucket; PUTs/s and
transactions/s. etcd and SeaweedFS are this process's children, at its
priority.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from magnetar.metadata import EtcdMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import UNWATCHED_ROOTS, ManagedLedgerFactory, StorageConfig
from magnetar.storage.cache import CacheBudget
from magnetar.storage.object.commit_timings import BOUNDS
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar_harness.etcd import running_etcd
from magnetar_harness.objectstore import running_seaweed


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(values: list[float]) -> str:
    return (f"n {len(values)}, p50 {_pct(values, 0.5) * 1e3:.1f} p99 {_pct(values, 0.99) * 1e3:.1f} "
            f"max {max(values, default=float('nan')) * 1e3:.1f} ms")


def _phase(hist) -> str:
    count = hist.count
    if not count:
        return "-"
    running, p99 = 0, "+Inf"
    for bound, n in zip([*BOUNDS, float("inf")], hist.counts):
        running += n
        if running >= 0.99 * count:
            p99 = f"{bound * 1e3:g}"
            break
    return f"{hist.sum / count * 1e3:.1f} ({p99})"


async def measure(etcd_url: str, objects_url: str, seconds: float, rate: float, budget: float) -> dict:
    store = await EtcdMetadataStore.open(etcd_url, unwatched=UNWATCHED_ROOTS)
    config = StorageConfig()
    cache = CacheBudget(config.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), profile="latency", put_budget_per_s=budget,
                            cache_budget=cache, collect_interval_s=None)
    factory = ManagedLedgerFactory(Path(tempfile.mkdtemp()), store, config, backend=backend, cache_budget=cache)
    ml = await factory.open("bench/tail")
    path = ml._appends  # the bench looks inside: which appends a rollover held
    roller = ml._roller
    rolls: list[float] = []
    real_roll = roller.roll

    async def timed_roll(*args):
        began = time.monotonic()
        try:
            return await real_roll(*args)
        finally:
            rolls.append(time.monotonic() - began)

    roller.roll = timed_roll
    payload = b"x" * 100
    held: list[float] = []
    other: list[float] = []
    committer = backend.committer
    puts0, txns0, waited0 = committer.puts, committer.transactions, committer.budget.waited_s
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Future] = set()

    def done(fut: asyncio.Future, issued: float, during_roll: bool) -> None:
        pending.discard(fut)
        if not fut.cancelled() and fut.exception() is None:
            (held if during_roll else other).append(loop.time() - issued)

    began = loop.time()
    n = int(seconds * rate)
    for i in range(n):
        delay = began + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        during = path._rolling
        fut = ml.append(payload)
        pending.add(fut)
        fut.add_done_callback(lambda f, t=loop.time(), d=during: done(f, t, d))
    if pending:
        await asyncio.wait(pending, timeout=30)
    elapsed = loop.time() - began
    phases = {name: _phase(h) for name, h in committer.timings.phases.items()}
    result = {"all": held + other, "held": held, "other": other, "rolls": rolls,
              "puts_per_s": (committer.puts - puts0) / elapsed,
              "txns_per_s": (committer.transactions - txns0) / elapsed,
              "budget_waited_s": committer.budget.waited_s - waited0, "phases": phases}
    await factory.close()
    await store.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--budget", type=float, default=StorageConfig().object_put_budget_per_s)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        with running_etcd(Path(work) / "etcd") as etcd, running_seaweed(Path(work) / "objects") as seaweed:
            for i in range(args.repeats):
                load = os.getloadavg()[0]
                r = asyncio.run(measure(etcd.store_url(f"tail-{i}"), seaweed.store_url(f"tail-{i}"), args.seconds,
                                        args.rate, args.budget))
                print(f"run {i}: load {load:.1f} -> {os.getloadavg()[0]:.1f}; {args.rate:,.0f} appends/s, "
                      f"budget {args.budget:g}/s", flush=True)
                print(f"  all appends:       {_summary(r['all'])}")
                print(f"  held by rollover:  {_summary(r['held'])}")
                print(f"  the others:        {_summary(r['other'])}")
                print(f"  rollovers: {len(r['rolls'])}, each " +
                      ", ".join(f"{s * 1e3:.0f}" for s in r["rolls"]) + " ms")
                print(f"  PUTs/s {r['puts_per_s']:.1f}, etcd txns/s {r['txns_per_s']:.1f}, "
                      f"budget waits {r['budget_waited_s'] * 1e3:.0f} ms in all")
                print("  commit phases, mean ms (p99 bucket): " +
                      ", ".join(f"{k} {v}" for k, v in r["phases"].items()), flush=True)


if __name__ == "__main__":
    main()
