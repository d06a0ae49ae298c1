"""A long sending cut in wide windows (a minute each, ``--windows``): the
latency of each beside what the broker did in it, to compare a run's
minutes before its ledgers roll over with the minutes after.

Per window, on the bench's clock (``time.monotonic()``):

- the client's side: messages sent, latency samples, their p50/p99/max
  (exact: :func:`magnetar.perf.series.buckets` cut at the window's width)
  and how many were above 100 ms;
- the broker's counters read by the bench's sampler (``/metrics`` every few
  seconds): PUTs/s, GETs/s, the committer's transactions/s, etcd's
  transactions/s (``etcd_mvcc_txn_total``: every broker's, reads included)
  and writes/s (``etcd_server_proposals_committed_total``: every change,
  rollovers' and compactions' too), its Range calls/s (``grpc_server_handled_total``
  of ``Range``: reads outside a transaction), between the first and last reading
  inside the window; the broker's RSS at the window's last reading;
- ``--broker-timeline``'s records: the event loop's worst lag, the seals
  and compactions that ended in it;
- the broker's CPU (% of a core), its event loop's thread on a core
  (``loop``, % of one) and waiting for one (``rqwait``, ms per second),
  and the machine's busy share (:class:`bench.send_series.Machine`); the
  host's steal (% of all cores) and ``host``, its speed for pure Python
  against the fastest window that sent (% of it, 100 the fastest:
  :mod:`bench.host_speed`), so that a window whose broker spends more
  per message can be told from one whose host ran slower. A
  profiler's "busy" of the loop's thread is about ``loop`` plus ``rqwait``
  (figures at 10,000 topics: docs/object-storage.md, "What is not done yet").

Failure modes: a column without its records is None (printed ``-``).
"""
from __future__ import annotations

from magnetar.perf.series import bucket_index

#: Counters read by the bench's sampler, as rates per second in each window.
RATES = (("puts", "PUT/s"), ("gets", "GET/s"), ("txns", "txn/s"), ("etcd_txns", "etcdtx/s"),
         ("etcd_writes", "etcdwr/s"), ("etcd_reads", "etcdrd/s"))
#: etcd's own mean time per operation in each window (ms): the sampled
#: running ``<key>_s`` (seconds) over ``<key>_n`` (operations), so that a
#: phase whose commit transactions slow down says whether etcd's disk
#: (WAL fsync, backend commit), its apply, or a Txn's whole time in etcd
#: (arrival to answer: with etcd's extensive metrics only) grew.
MEANS = (("etcd_fsync", "fsync"), ("etcd_backend", "bkcommit"), ("etcd_apply", "apply"), ("etcd_served", "etcdTxn"))


def annotate(windows: list[dict], t0: float, width: float, samples: list | None = None,
             lags: list | None = None, events: list | None = None, machine=None) -> None:
    """Adds the broker's columns to each of ``windows`` (buckets of
    ``width`` s from ``t0``, as :func:`magnetar.perf.series.buckets` made
    them); ``samples``: the sampler's ``(t, counters)`` pairs."""
    n = len(windows)
    for i, w in enumerate(windows):
        begin, end = t0 + i * width, t0 + (i + 1) * width
        if samples is not None:
            inside = [s for s in samples if begin <= s[0] <= end]
            if len(inside) >= 2:
                (ta, a), (tb, b) = inside[0], inside[-1]
                for key, _ in RATES:
                    if key in a and key in b:
                        w[f"{key}_per_s"] = round((b[key] - a[key]) / (tb - ta), 1)
                for key, _ in MEANS:
                    ops = b.get(f"{key}_n", 0) - a.get(f"{key}_n", 0)
                    if ops > 0:
                        w[f"{key}_ms"] = round(1000 * (b[f"{key}_s"] - a[f"{key}_s"]) / ops, 2)
                if "etcd_cpu" in a and "etcd_cpu" in b:
                    w["etcd_cpu"] = round(100 * (b["etcd_cpu"] - a["etcd_cpu"]) / (tb - ta))
                if "etcd_snapshots" in a and "etcd_snapshots" in b:
                    w["etcd_snapshots"] = int(b["etcd_snapshots"] - a["etcd_snapshots"])
            if inside and inside[-1][1].get("etcd_db"):
                w["etcd_db_mb"] = round(inside[-1][1]["etcd_db"] / (1 << 20))
            if inside and inside[-1][1].get("rss"):
                w["rss_mb"] = round(inside[-1][1]["rss"] / (1 << 20))
        if machine is not None:
            cpu = machine.between(begin, end) or {}
            w["broker_cpu"], w["machine_busy"] = cpu.get("broker"), cpu.get("machine")
            w["loop_cpu"], w["rq_wait"] = cpu.get("loop_cpu"), cpu.get("rq_wait")
            w["steal"], w["host_us"] = cpu.get("steal"), cpu.get("host_us")
    # Against the sending's windows only: the drain after it has an idle machine.
    units = [w["host_us"] for w in windows if w.get("host_us") and w.get("sent")]
    for w in windows:
        # The fastest window is 100: a window at 80 ran pure Python at 80 % of its speed.
        w["host"] = round(100 * min(units) / w["host_us"]) if units and w.get("host_us") else None
    if lags is not None:
        for w in windows:
            w["lag_ms"] = 0.0
        for meant, ms in lags:
            i = bucket_index(meant, t0, width)
            if 0 <= i < n and ms > windows[i]["lag_ms"]:
                windows[i]["lag_ms"] = round(ms, 1)
    if events is not None:
        for w in windows:
            w.update(seals=0, compactions=0)
        for kind, t in events:
            i = bucket_index(t, t0, width)
            if 0 <= i < n and kind in ("seal", "compact"):
                windows[i]["seals" if kind == "seal" else "compactions"] += 1


def table(windows: list[dict]) -> list[str]:
    """Lines of a table with one row per window."""
    def cell(value, width: int, digits: int = 1) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"

    head = (f"{'t s':>5} {'sent/s':>7} {'p50':>6} {'p99':>7} {'max':>7} {'>100':>5} | "
            + " ".join(f"{label:>8}" for _, label in RATES)
            + " | " + " ".join(f"{label:>8}" for _, label in MEANS)
            + f" {'etcdCPU':>7} {'snap':>4} {'dbMB':>5}"
            + f" | {'rss MB':>6} {'lag':>6} {'seals':>5} {'cmpct':>5} {'brkCPU':>6} {'loop':>4} {'rqwait':>6} {'busy':>4} {'steal':>5} {'host':>4}")
    lines = [head]
    for i, w in enumerate(windows):
        width = (windows[1]["t"] - windows[0]["t"]) if len(windows) > 1 else 60.0
        lines.append(
            f"{w['t']:>5.0f} {w['sent'] / width:>7.0f} {cell(w['p50_ms'], 6)} {cell(w['p99_ms'], 7)} "
            f"{cell(w['max_ms'], 7)} {w.get('over_100', 0):>5} | "
            + " ".join(cell(w.get(f"{key}_per_s"), 8) for key, _ in RATES)
            + " | " + " ".join(cell(w.get(f"{key}_ms"), 8, 2) for key, _ in MEANS)
            + f" {cell(w.get('etcd_cpu'), 7, 0)} {w.get('etcd_snapshots', '-'):>4} {cell(w.get('etcd_db_mb'), 5, 0)}"
            + f" | {cell(w.get('rss_mb'), 6, 0)} {cell(w.get('lag_ms'), 6)} {w.get('seals', '-'):>5} "
              f"{w.get('compactions', '-'):>5} {cell(w.get('broker_cpu'), 6, 0)} {cell(w.get('loop_cpu'), 4, 0)} "
              f"{cell(w.get('rq_wait'), 6, 0)} {cell(w.get('machine_busy'), 4, 0)} {cell(w.get('steal'), 5, 0)} "
              f"{cell(w.get('host'), 4, 0)}")
    return lines
