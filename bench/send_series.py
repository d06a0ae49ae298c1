"""A sending's half-second series beside what the broker and the machine
did meanwhile, on one clock (``time.monotonic()``, system-wide on Linux).

The client's side comes from ``magnetar perf`` (``WorkloadSpec.series_s``:
per bucket by send time, messages sent, acknowledged, p50/p99/max of the
samples sent in it, :mod:`magnetar.perf.series`). :func:`annotate` adds to
each bucket, from records a bench took on the same clock:

- ``gc``: the broker's collections that started in it (``--gc-census``'s
  ``(start, generation, pause ms, collected)``): ``gc_ms`` their pauses'
  sum, ``gc`` a brief (``g1 98.6 g0 3x4.7``);
- ``lag_ms``: the broker's event loop's worst lag in it (:mod:`bench.broker_timeline`);
- commits whose PUT *began* in it (:mod:`bench.broker_timeline`): how
  many, their largest batch count, and each phase's worst (``gather``
  oldest batch to due, ``pipe`` waiting for room in the pipeline,
  ``budget`` for a token of the PUT budget, ``put``, ``wait`` for the
  previous commit's transaction to be sent (or for that commit to end, if
  unchained), ``txn``, ``receipts``, ``total`` oldest
  batch to receipts);
- ``seals``, ``compactions``: object ledgers whose seal (a rollover's, a
  close's) and whose compaction ended in it (:mod:`bench.broker_timeline`);
- ``cpu``: each process group's share of a core over the bucket, every
  other process's (``others``), the machine's busy and iowait share of
  all cores, the runnable tasks, and stalls in ms per second: the
  broker's event-loop thread waiting for a core (``rq_wait``, its
  schedstat), any task waiting for one (``psi_cpu``, /proc/pressure/cpu
  some) and every task stalled on IO (``psi_io``, io full)
  (:class:`Machine`, /proc read every :data:`MACHINE_EVERY_S`); the
  host's steal (% of all cores: time the hypervisor gave to someone else)
  and its speed for pure Python (``host_us``: the median of
  :mod:`bench.host_speed`'s fixed unit, in µs; larger is slower), to tell
  a broker that got slower from a host that did.

:func:`table` prints the buckets worth a look. Failure modes: a missing
record leaves its columns out (None), never an error.
"""
from __future__ import annotations

import os
from pathlib import Path

from bench.host_speed import HostSpeed
from bench.sampling import PeriodicSampler
from magnetar.perf.series import bucket_index

#: Seconds between two readings of /proc by :class:`Machine`.
MACHINE_EVERY_S = 0.25
PHASES = ("gather", "pipe", "budget", "put", "wait", "txn", "receipts", "total")
_PHASE_SPANS = {"gather": ("first", "due"), "pipe": ("due", "room"), "budget": ("room", "taken"),
                "put": ("began", "put_done"), "wait": ("put_done", "txn_began"),
                "txn": ("txn_began", "txn_done"), "receipts": ("txn_done", "ended"), "total": ("first", "ended")}


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc's parent links)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def cpu_ticks(pid: int) -> int | None:
    """User + system clock ticks of ``pid`` (its threads'), None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def machine_ticks() -> tuple[int, int, int, int]:
    """(busy, iowait, total, steal) clock ticks of all cores, from /proc/stat
    (busy counts steal: a core the hypervisor lent away was not idle)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle, iowait = values[3], values[4]
    total = sum(values[:8])  # guest time is inside user already
    return total - idle - iowait, iowait, total, values[7]


def loop_thread_ns(pid: int) -> tuple[int, int] | None:
    """Nanoseconds ``pid``'s main thread (a broker's event loop) spent on a
    core and runnable but not running (/proc/<pid>/schedstat), None if gone."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[0]), int(fields[1])
    except (OSError, IndexError, ValueError):
        return None


def pressure_us(resource: str, kind: str) -> int | None:
    """The kernel's stall total (µs) of ``resource`` (cpu, io, memory),
    ``kind`` some or full (/proc/pressure), None without PSI."""
    try:
        for line in Path(f"/proc/pressure/{resource}").read_text().splitlines():
            if line.startswith(kind):
                return int(line.rsplit("total=", 1)[1])
    except (OSError, IndexError, ValueError):
        return None
    return None


def runnable() -> int:
    """Tasks runnable now (/proc/loadavg's fourth field, less this reader)."""
    return int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1


class Machine:
    """``with Machine({"broker": [pid], ...}, waiting=pid) as m:`` reads,
    every :data:`MACHINE_EVERY_S` on a thread, the CPU ticks of each group
    of processes, the machine's, the runnable count, and the stalls:
    ``waiting``'s main thread's run-queue wait, the kernel's CPU ``some``
    and IO ``full`` pressure, into ``m.samples`` (``(t, {group: ticks},
    (busy, iowait, total, steal), runnable, (wait ns, cpu µs, io µs, on-core ns))``);
    and runs :class:`bench.host_speed.HostSpeed` beside (``m.host``)."""

    def __init__(self, groups: dict[str, list[int]], waiting: int | None = None) -> None:
        self.groups = groups
        self.waiting = waiting
        self.tick_s = 1 / os.sysconf("SC_CLK_TCK")
        self.cores = os.cpu_count() or 1
        self._sampler = PeriodicSampler(self._read, MACHINE_EVERY_S)
        self.host = HostSpeed()

    @property
    def samples(self) -> list[tuple]:
        return [(t, *reading) for t, reading in self._sampler.samples]

    def __enter__(self) -> "Machine":
        self.host.__enter__()
        self._sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._sampler.__exit__(*exc)
        self.host.__exit__(*exc)

    def _read(self) -> tuple:
        groups = {name: sum(t for t in map(cpu_ticks, pids) if t is not None)
                  for name, pids in self.groups.items()}
        loop = loop_thread_ns(self.waiting) if self.waiting else None
        stalls = (loop[1] if loop else None, pressure_us("cpu", "some"), pressure_us("io", "full"),
                  loop[0] if loop else None)
        return groups, machine_ticks(), runnable(), stalls

    def between(self, begin: float, end: float) -> dict | None:
        """CPU per group (% of a core), the machine's busy and iowait (% of
        all cores) and the most runnable tasks between the samples nearest
        ``begin`` and ``end``; None with fewer than two samples there."""
        inside = [s for s in self.samples if begin - MACHINE_EVERY_S / 2 <= s[0] <= end + MACHINE_EVERY_S / 2]
        if len(inside) < 2:
            return None
        (t0, g0, m0, _, s0), (t1, g1, m1, _, s1) = inside[0], inside[-1]
        seconds = t1 - t0
        total = (m1[2] - m0[2]) or 1
        out = {name: round(100 * (g1[name] - g0[name]) * self.tick_s / seconds) for name in g0}
        busy = (m1[0] - m0[0]) / total
        # Everyone else's share of a core: the machine's busy cores less the groups'.
        out.update(others=max(0, round(100 * busy * self.cores - sum(out.values()))), machine=round(100 * busy),
                   iowait=round(100 * (m1[1] - m0[1]) / total), runnable=max(s[3] for s in inside),
                   steal=round(100 * (m1[3] - m0[3]) / total), host_us=self.host.between(begin, end))
        # Stalls, ms per second: the loop's thread waiting for a core; any task waiting (PSI cpu some);
        # every task stalled on IO (PSI io full). And the loop's thread on a core (% of one): with its
        # wait, what a profiler's "busy" of that thread splits into.
        for name, at, scale in (("rq_wait", 0, 1e-6), ("psi_cpu", 1, 1e-3), ("psi_io", 2, 1e-3),
                                ("loop_cpu", 3, 1e-7)):
            if s0[at] is not None and s1[at] is not None:
                out[name] = round((s1[at] - s0[at]) * scale / seconds)
        return out


def annotate(series: list[dict], t0: float, width: float, collections: list | None = None,
             lags: list | None = None, commits: list[dict] | None = None, machine: Machine | None = None,
             events: list | None = None) -> None:
    """Adds the broker's and the machine's columns to each bucket of
    ``series`` (buckets of ``width`` s from ``t0``; see the module's
    docstring). Records outside the series are left out."""
    n = len(series)
    if collections is not None:
        for bucket in series:
            bucket.update(gc_ms=0.0, gc="")
        per: list[dict] = [{} for _ in range(n)]
        for start, generation, ms, _ in collections:
            i = bucket_index(start, t0, width)
            if 0 <= i < n:
                series[i]["gc_ms"] = round(series[i]["gc_ms"] + ms, 2)
                per[i].setdefault(generation, []).append(ms)
        for bucket, found in zip(series, per):
            bucket["gc"] = " ".join(
                f"g{g} " + (f"{ms[0]:.1f}" if len(ms) == 1 else f"{len(ms)}x{max(ms):.1f}")
                for g, ms in sorted(found.items(), reverse=True))
    if lags is not None:
        for bucket in series:
            bucket["lag_ms"] = 0.0
        for meant, ms in lags:
            i = bucket_index(meant, t0, width)
            if 0 <= i < n and ms > series[i]["lag_ms"]:
                series[i]["lag_ms"] = round(ms, 1)
    if commits is not None:
        for bucket in series:
            bucket.update(commits=0, batches_max=0, **{f"{p}_ms": 0.0 for p in PHASES})
        for c in commits:
            i = bucket_index(c["began"], t0, width)
            if not 0 <= i < n:
                continue
            bucket = series[i]
            bucket["commits"] += 1
            bucket["batches_max"] = max(bucket["batches_max"], c.get("batches", 0))
            for phase, (a, b) in _PHASE_SPANS.items():
                bucket[f"{phase}_ms"] = max(bucket[f"{phase}_ms"], round((c[b] - c[a]) * 1000, 1))
    if events is not None:
        for bucket in series:
            bucket.update(seals=0, compactions=0)
        for kind, t in events:
            i = bucket_index(t, t0, width)
            if 0 <= i < n and kind in ("seal", "compact"):
                series[i]["seals" if kind == "seal" else "compactions"] += 1
    if machine is not None:
        for bucket in series:
            begin = t0 + bucket["t"]
            bucket["cpu"] = machine.between(begin, begin + width)


def worth_a_look(series: list[dict], above_ms: float) -> list[int]:
    """Indexes of the buckets whose p99 is above ``above_ms`` (all if ``above_ms`` < 0)."""
    return [i for i, b in enumerate(series) if above_ms < 0 or (b.get("p99_ms") or 0) > above_ms]


def table(series: list[dict], above_ms: float = 50.0) -> list[str]:
    """Lines of a compact table of the buckets :func:`worth_a_look`."""
    rows = worth_a_look(series, above_ms)
    if not rows:
        return []
    groups = next((list(b["cpu"]) for b in series if b.get("cpu")), [])
    head = (f"{'t s':>6} {'sent':>6} {'smpl':>5} {'answ':>5} {'p50':>6} {'p99':>6} {'max':>6} {'>50':>4} {'>100':>4} "
            f"| {'gc ms':>6} {'gc':<14}"
            f"| {'lag':>5} | {'cmts':>4} " + " ".join(f"{p[:5]:>5}" for p in PHASES) + " | "
            f"{'seals':>5} {'cmpct':>5} | " + " ".join(f"{g[:7]:>7}" for g in groups))

    def cell(value, width: int, digits: int = 1) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"

    lines = [head]
    for i in rows:
        b = series[i]
        cpu = b.get("cpu") or {}
        lines.append(
            f"{b['t']:>6.1f} {b['sent']:>6} {b['samples']:>5} {b.get('answered', 0):>5} {cell(b['p50_ms'], 6)} {cell(b['p99_ms'], 6)} "
            f"{cell(b['max_ms'], 6)} {b.get('over_50', 0):>4} {b.get('over_100', 0):>4} | {cell(b.get('gc_ms'), 6)} {b.get('gc', ''):<14}| {cell(b.get('lag_ms'), 5)} | "
            f"{b.get('commits', 0):>4} " + " ".join(cell(b.get(f"{p}_ms"), 5) for p in PHASES) + " | "
            f"{b.get('seals', '-'):>5} {b.get('compactions', '-'):>5} | "
            + " ".join(f"{'-' if cpu.get(g) is None else cpu[g]:>7}" for g in groups))
    return lines
