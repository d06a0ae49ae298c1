"""Profile the Magnetar broker under workload (1) with py-spy.

    .venv/bin/python -m bench.profile [--seconds 20] [--size 100] [--sync-policy always] [--out bench/results]

Starts a broker (fresh temp data dir), drives it with the workload-1
producers (2 processes, 100 B, batching on, max rate) and meanwhile runs::

    py-spy record --pid <broker> --rate 250 --threads --gil --format raw  -o profile.txt
    py-spy record --pid <broker> --rate 250 --threads --format flamegraph -o profile.svg

one after the other, each for ``--seconds``. ``profile.txt`` holds only
samples of the thread holding the GIL (py-spy's idle detection counts threads
blocked on locks or in uvloop's C loop as busy, so plain samples mostly
measure waiting); it is summarised into ``profile-summary.md``: the top
functions by own samples ("self": where the Python CPU goes) and by samples
with the function on the stack ("total": a call including callees), as % of
GIL-holding samples. The summary starts with each thread's real CPU use from
``/proc/<pid>/task``, which also covers work done without the GIL (fsync,
socket I/O, uvloop's C code).

Failure modes: without py-spy (``pip install py-spy``) or ptrace permission
it says so and exits 1.
"""
from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from bench.servers import MagnetarServer
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec

HERE = Path(__file__).resolve().parent


def py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.exists() else shutil.which("py-spy")


def thread_cpu(pid: int) -> dict:
    """``{tid: (thread name, cpu seconds)}`` for every thread of ``pid``, plus ``"_t"``: now."""
    import os
    import time

    ticks = os.sysconf("SC_CLK_TCK")
    out: dict = {"_t": time.monotonic()}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            raw = (task / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        out[task.name] = (name, (int(fields[11]) + int(fields[12])) / ticks)
    return out


def _function(frame: str) -> str:
    """``name (file:line)`` -> ``name (file)``: aggregate a function's lines."""
    name, _, where = frame.partition(" (")
    return f"{name} ({where.rsplit(':', 1)[0].rstrip(')')})" if where else name


def summarise(raw: Path, top: int = 25) -> str:
    """Markdown tables of the hottest functions in a py-spy raw (collapsed) profile.

    Frames on every stack of a thread (runpy, typer, the event loop's entry)
    are left out of the "total" table: they say nothing."""
    self_s: collections.Counter = collections.Counter()
    total_s: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_function(f) for f in stack.split(";")]
        thread, frames = frames[0], frames[1:]
        samples += n
        threads[thread] += n
        if frames:
            self_s[frames[-1]] += n
        for f in set(frames):
            total_s[f] += n
    if not samples:
        return "no samples (was the broker idle?)\n"
    out = [f"{samples} samples, by thread:", ""]
    out += [f"- {t}: {n / samples:.1%}" for t, n in threads.most_common()]
    everywhere = {n for n in threads.values()}
    for title, counter in (("self (own time)", self_s), ("total (with callees)", total_s)):
        rows = [(f, n) for f, n in counter.most_common() if title.startswith("self") or n not in everywhere]
        out += ["", f"| % {title} | function (file) |", "|---:|---|"]
        out += [f"| {n / samples:.1%} | `{f}` |" for f, n in rows[:top]]
    return "\n".join(out) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--size", type=int, default=100)
    p.add_argument("--sync-policy", default="always")
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--native", action="store_true", help="include C frames (py-spy --native) in profile.txt")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--unbatched", action="store_true",
                   help="one message per SEND (every message an entry), raw generator, 1 producer process")
    args = p.parse_args()
    spy = py_spy()
    if spy is None:
        print("py-spy is not installed: .venv/bin/pip install py-spy", file=sys.stderr)
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    server = MagnetarServer(Path(tempfile.mkdtemp(prefix="magnetar-profile-")), args.sync_policy).start()
    server_pid = server.pid
    workers = 1 if args.unbatched else 2
    spec = WorkloadSpec(service_url=server.url, topic="profile", size=args.size, producers=workers,
                        producer_workers=workers, rate=0, duration=2 * args.seconds + 6,
                        batching=not args.unbatched, batch_max_messages=1000, batch_delay_ms=1,
                        max_pending=10_000, subscriptions=[], consumers=0)
    driver = "magnetar.perf.raw_driver" if args.unbatched else "magnetar.perf.pulsar_driver"
    result: dict = {}
    load = threading.Thread(target=lambda: result.update(run(spec, produce=True, consume=False, driver=driver,
                                                             broker_pid=server.pid, command="profile")))
    load.start()
    try:
        threading.Event().wait(3)  # let the producers reach steady state
        common = [spy, "record", "--pid", str(server.pid), "--rate", str(args.rate), "--threads",
                  "--duration", str(int(args.seconds))]
        threads0 = thread_cpu(server.pid)
        passes = (("raw", "profile.txt", ["--gil", *(["--native"] if args.native else [])]),
                  ("flamegraph", "profile.svg", []))
        for fmt, name, extra in passes:
            cmd = [*common, *extra, "--format", fmt, "-o", str(out / name)]
            print("$", " ".join(cmd), file=sys.stderr)
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
        threads1 = thread_cpu(server.pid)
    finally:
        load.join()
        server.stop()
    produced = result.get("produce") or {}
    shape = ("unbatched: one message per SEND, raw generator, 1 producer process" if args.unbatched
             else "workload 1: batching on, 2 producer processes")
    broker = result.get("broker") or {}
    header = (f"# Broker profile ({args.size} B, {shape}, max rate, sync_policy={args.sync_policy})\n\n"
              f"Command: `.venv/bin/python -m bench.profile {' '.join(sys.argv[1:])}`\n\n"
              f"Load during the run: {produced.get('msg_per_s', 0):,.0f} msg/s, broker CPU "
              f"{broker.get('cpu_percent')}% of a core"
              + (f", {broker['cpu_us_per_message']:.1f} us of broker CPU per message" if
                 broker.get("cpu_us_per_message") else "") + ".\n\n")
    span = threads1.pop("_t") - threads0.pop("_t")
    per_thread = ["CPU by thread over both py-spy passes (from /proc/<pid>/task, % of one core):", ""]
    per_thread += [f"- {'main thread (event loop)' if k == str(server_pid) else f'{name} (tid {k})'}: "
                   f"{100 * (threads1[k][1] - threads0.get(k, (name, 0.0))[1]) / span:.1f}%"
                   for k, (name, _) in sorted(threads1.items(), key=lambda kv: -kv[1][1])
                   if threads1[k][1] - threads0.get(k, (name, 0.0))[1] > 0]
    summary = (header + "\n".join(per_thread) + "\n\nPython samples holding the GIL (`py-spy --gil`):\n\n"
               + summarise(out / "profile.txt"))
    (out / "profile-summary.md").write_text(summary)
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
