"""Where a lone ``latency`` topic's publish tail comes from, on the storage
layer alone (issue 41): one managed ledger on the object backend, a real
etcd and a real SeaweedFS, appends at a fixed rate, each timed from the
call to its receipt. No broker, no client: what is left is the storage's.

    .venv/bin/python -m bench.object_tail [--seconds 10] [--rate 1000] [--budget 250] [--repeats 2]
        [--compact-from kept,store]

Printed per run: append latency p50/p99/max; the same for the appends
issued while the managed ledger was rolling over (those a rollover holds)
and for the others; the rollovers (how many, how long each held appends);
the PUT budget's waits; the commit phases (``put``: the PUT, ``transaction``:
the etcd transaction, ``gather``: arrival to the commit taking the batch,
budget and pipeline waits included) as mean and p99 bucket; PUTs/s and
transactions/s; the timeline: each append's time split by the commit that
carried it (``gather``, ``room``: a pipeline slot, ``token``: the PUT
budget, ``put``, ``wait``: the previous transaction sent, ``txn``, ``receipts``,
``callback``: the commit's end to the append's receipt), as means over all
appends and over those at or past the p99, the slowest PUTs and
transactions and when in the run they came, and the event loop's lag.
``--compact-from kept,store`` runs each repeat twice: sealed ledgers
compacted from the bytes their writer kept, and from the store (GETs).
A 1 s run first warms the fresh SeaweedFS up (it grows volumes at its
first PUTs). etcd and SeaweedFS are this process's children, at its
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


async def measure(etcd_url: str, objects_url: str, seconds: float, rate: float, budget: float,
                  kept: bool = True) -> dict:
    store = await EtcdMetadataStore.open(etcd_url, unwatched=UNWATCHED_ROOTS)
    config = StorageConfig()
    cache = CacheBudget(config.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), profile="latency", put_budget_per_s=budget,
                            cache_budget=cache, collect_interval_s=None)
    if not kept:  # compactions read the store, as before the writer kept its sections' bytes
        backend.kept.max_bytes = 0
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
    timed: list[tuple[float, float]] = []  # (issued, receipt) per append, loop clock = monotonic
    committer = backend.committer
    committer.trace = []
    lags: list[float] = []
    watching = True

    async def watch_loop() -> None:  # how late the event loop runs a 1 ms sleep
        while watching:
            t = time.monotonic()
            await asyncio.sleep(0.001)
            lags.append(time.monotonic() - t - 0.001)

    watcher = asyncio.get_running_loop().create_task(watch_loop())
    puts0, txns0, waited0 = committer.puts, committer.transactions, committer.budget.waited_s
    loop = asyncio.get_running_loop()
    pending: set[asyncio.Future] = set()

    def done(fut: asyncio.Future, issued: float, during_roll: bool) -> None:
        pending.discard(fut)
        if not fut.cancelled() and fut.exception() is None:
            now = loop.time()
            (held if during_roll else other).append(now - issued)
            timed.append((issued, now))

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
    watching = False
    await watcher
    phases = {name: _phase(h) for name, h in committer.timings.phases.items()}
    result = {"all": held + other, "held": held, "other": other, "rolls": rolls,
              "puts_per_s": (committer.puts - puts0) / elapsed,
              "txns_per_s": (committer.transactions - txns0) / elapsed,
              "budget_waited_s": committer.budget.waited_s - waited0, "phases": phases,
              "timeline": timeline(timed, committer.trace), "loop_lag": lags}
    await factory.close()
    await store.close()
    return result


#: An append's time, segment by segment, from the commit that carried it.
SEGMENTS = ("gather", "room", "token", "put", "wait", "txn", "receipts", "callback")


def timeline(timed: list[tuple[float, float]], trace: list[dict]) -> dict:
    """Each append's latency split into segments by the commit that took
    it (the first commit that took its batches at or after the append was
    issued): ``gather`` issue to due, ``room`` waiting for a pipeline slot,
    ``token`` for the PUT budget, ``put``, ``wait`` (the previous commit's
    transaction), ``txn``, ``receipts`` (completing the commit's batches)
    and ``callback`` (the commit's end to the append's future resolving:
    the event loop and the managed ledger's own path). Means over all the
    appends and over those at or past the p99."""
    import bisect
    commits = [c for c in trace if "ended" in c]
    takens = [c["taken"] for c in commits]
    rows = []
    for issued, done in timed:
        i = bisect.bisect_left(takens, issued)
        if i == len(commits):
            continue
        c = commits[i]
        due = max(issued, c["due"])
        room = max(due, c["room"])
        rows.append((done - issued, {"gather": due - issued, "room": room - due, "token": c["taken"] - room,
                                     "put": c["put_done"] - c["taken"], "wait": c["txn_began"] - c["put_done"],
                                     "txn": c["txn_done"] - c["txn_began"], "receipts": c["ended"] - c["txn_done"],
                                     "callback": done - c["ended"]}))
    rows.sort(key=lambda r: r[0])
    tail = rows[int(0.99 * len(rows)):] if rows else []

    def means(part):
        return {k: sum(r[1][k] for r in part) / len(part) for k in SEGMENTS} if part else {}
    start = commits[0]["first"] if commits else 0.0
    slowest = {phase: sorted(((c[b] - c[a]) * 1e3, c[a] - start) for c in commits)[-6:]
               for phase, a, b in (("put", "taken", "put_done"), ("txn", "txn_began", "txn_done"))}
    return {"all": means(rows), "tail": means(tail), "tail_n": len(tail), "slowest": slowest,
            "tail_worst": [(round(r[0] * 1e3, 1), {k: round(v * 1e3, 1) for k, v in r[1].items()})
                           for r in rows[-5:]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--budget", type=float, default=StorageConfig().object_put_budget_per_s)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--compact-from", default="kept",
                        help="kept (the default: a writer compacts its sealed ledger from the bytes it kept), "
                             "store (from GETs, as before), or kept,store: both in each repeat")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        with running_etcd(Path(work) / "etcd") as etcd, running_seaweed(Path(work) / "objects") as seaweed:
            # A fresh SeaweedFS grows its volumes at the first PUTs (about a
            # second): a short run first, not reported, so run 0 is like the others.
            asyncio.run(measure(etcd.store_url("tail-warm"), seaweed.store_url("tail-warm"), 1.0, args.rate,
                                args.budget))
            for i, source in ((i, source) for i in range(args.repeats) for source in args.compact_from.split(",")):
                load = os.getloadavg()[0]
                r = asyncio.run(measure(etcd.store_url(f"tail-{i}-{source}"), seaweed.store_url(f"tail-{i}-{source}"),
                                        args.seconds, args.rate, args.budget, kept=source == "kept"))
                print(f"run {i}, compactions from {source}: load {load:.1f} -> {os.getloadavg()[0]:.1f}; "
                      f"{args.rate:,.0f} appends/s, budget {args.budget:g}/s", flush=True)
                print(f"  all appends:       {_summary(r['all'])}")
                print(f"  held by rollover:  {_summary(r['held'])}")
                print(f"  the others:        {_summary(r['other'])}")
                print(f"  rollovers: {len(r['rolls'])}, each " +
                      ", ".join(f"{s * 1e3:.0f}" for s in r["rolls"]) + " ms")
                print(f"  PUTs/s {r['puts_per_s']:.1f}, etcd txns/s {r['txns_per_s']:.1f}, "
                      f"budget waits {r['budget_waited_s'] * 1e3:.0f} ms in all")
                print("  commit phases, mean ms (p99 bucket): " +
                      ", ".join(f"{k} {v}" for k, v in r["phases"].items()), flush=True)
                t = r["timeline"]
                for name in ("all", "tail"):
                    print(f"  timeline, {name} appends{' (' + str(t['tail_n']) + ', >= p99)' if name == 'tail' else ''}"
                          ", mean ms: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in t[name].items()))
                for total, parts in t["tail_worst"]:
                    print(f"    worst {total} ms: " + ", ".join(f"{k} {v}" for k, v in parts.items()))
                for phase, worst in t["slowest"].items():
                    print(f"    slowest {phase}s (ms @ s into the run): " +
                          ", ".join(f"{ms:.0f} @ {at:.2f}" for ms, at in reversed(worst)))
                lag = r["loop_lag"]
                print(f"  event loop lag (1 ms sleeps): {_summary(lag)}", flush=True)


if __name__ == "__main__":
    main()
