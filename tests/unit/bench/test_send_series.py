"""bench/send_series.py and bench/broker_timeline.py: a sending's buckets
beside the broker's collections, loop lag and commits, on one clock."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench import broker_timeline, send_series

ROOT = Path(__file__).resolve().parents[3]


def bucket(t: float, p99: float | None) -> dict:
    return {"t": t, "sent": 10, "acked": 10, "samples": 2, "p50_ms": 1.0, "p99_ms": p99, "max_ms": p99}


def commit(began: float, put_ms: float) -> dict:
    stamps = dict(first=began - 0.004, due=began - 0.003, room=began - 0.002, taken=began - 0.001, began=began,
                  put_done=began + put_ms / 1000)
    stamps.update(txn_began=stamps["put_done"], txn_done=stamps["put_done"] + 0.002)
    stamps.update(ended=stamps["txn_done"] + 0.001, batches=7)
    return stamps


def test_the_broker_records_land_in_the_bucket_their_start_falls_in():
    t0 = 500.0
    series = [bucket(0.0, 10.0), bucket(0.5, 120.0), bucket(1.0, 20.0)]
    collections = [(t0 + 0.6, 1, 98.6, 0), (t0 + 0.7, 0, 4.0, 0), (t0 + 0.8, 0, 4.7, 0), (t0 + 1.4, 0, 1.0, 0),
                   (t0 - 1, 2, 500.0, 0), (t0 + 1.6, 2, 500.0, 0)]  # outside: left out
    lags = [(t0 + 0.1, 3.0), (t0 + 0.55, 90.0), (t0 + 0.9, 12.0)]
    commits = [commit(t0 + 0.52, 40.0), commit(t0 + 0.9, 15.0), commit(t0 + 1.2, 5.0)]
    send_series.annotate(series, t0, 0.5, collections, lags, commits)
    middle = series[1]
    assert (middle["gc_ms"], middle["gc"]) == (107.3, "g1 98.6 g0 2x4.7")
    assert (series[0]["gc_ms"], series[2]["gc"]) == (0.0, "g0 1.0")
    assert [b["lag_ms"] for b in series] == [3.0, 90.0, 0.0]
    assert [b["commits"] for b in series] == [0, 2, 1] and middle["batches_max"] == 7
    assert (middle["put_ms"], middle["txn_ms"], middle["total_ms"]) == (40.0, 2.0, 47.0)
    assert (middle["gather_ms"], middle["pipe_ms"], middle["budget_ms"]) == (1.0, 1.0, 1.0)
    assert series[0]["put_ms"] == 0.0 and series[2]["put_ms"] == 5.0


def test_the_table_shows_the_buckets_above_the_threshold_or_all():
    series = [bucket(0.0, 10.0), bucket(0.5, 120.0), bucket(1.0, None)]
    send_series.annotate(series, 0.0, 0.5, collections=[])
    assert send_series.worth_a_look(series, 50.0) == [1]
    assert len(send_series.table(series, 50.0)) == 2  # the header and one row
    assert len(send_series.table(series, -1)) == 4
    assert send_series.table(series, 500.0) == []


def test_the_machine_reads_its_processes_cpu():
    with send_series.Machine({"me": [os.getpid()]}, waiting=os.getpid()) as machine:
        spun = time.process_time() + 0.5
        while time.process_time() < spun or len(machine.samples) < 3:  # CPU spent, whatever else runs
            pass
    t = machine.samples
    found = machine.between(t[0][0], t[-1][0])
    assert found is not None and found["me"] * (t[-1][0] - t[0][0]) / 100 >= 0.2, found
    assert 0 <= found["machine"] <= 100 and found["runnable"] >= 0 and found["rq_wait"] >= 0
    assert 0 <= found["steal"] <= found["machine"]
    # The host's probe ran beside (a child process, on the same clock).
    assert found["host_us"] is None or found["host_us"] > 0
    assert machine.host._proc.poll() is not None
    # The spinning thread is the "waiting" pid's main thread: its time on a core is counted.
    assert found["loop_cpu"] * (t[-1][0] - t[0][0]) / 100 >= 0.2, found


def test_a_loop_lag_probe_sees_a_blocked_loop(tmp_path):
    timeline = broker_timeline.Timeline(str(tmp_path / "t-{pid}.jsonl"))
    loop = asyncio.new_event_loop()
    threading.Thread(target=timeline.probe, args=(loop,), daemon=True).start()

    async def block() -> None:
        await asyncio.sleep(0.1)
        time.sleep(0.15)  # the loop is stuck: the probes queue up behind it
        await asyncio.sleep(0.1)
    loop.run_until_complete(block())
    loop.close()
    timeline.flush()
    record = broker_timeline.read(str(tmp_path / f"t-{os.getpid()}.jsonl"))
    assert max(ms for _, ms in record["lags"]) >= 100, record["lags"]


def test_every_committer_made_is_traced_and_its_ended_commits_written(tmp_path):
    """In a fresh interpreter, as in a broker: the hook loads the module by
    path, then the broker's own import of the committer's module."""
    path = tmp_path / "timeline.jsonl"
    code = f"""
import importlib.util, time
spec = importlib.util.spec_from_file_location("t", {str(ROOT / 'bench' / 'broker_timeline.py')!r})
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
timeline = t.install({str(path)!r})
from magnetar.storage.object.commit import Committer
c = Committer(None, None, interval_s=0.02, max_bytes=1)
assert c.trace == []
now = time.monotonic()
c.trace.append(dict(first=now, due=now, room=now, taken=now, began=now, put_done=now, txn_began=now,
                    txn_done=now, ended=now + 0.01, batches=3))
c.trace.append(dict(first=now, batches=1))  # not ended yet: kept for the next flush
timeline.flush()
assert len(timeline.unended) == 1
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
    commits = broker_timeline.read(str(path))["commits"]
    assert len(commits) == 1 and commits[0]["batches"] == 3
    assert round((commits[0]["ended"] - commits[0]["txn_done"]) * 1000) == 10
    assert json.loads(path.read_text().splitlines()[0])["lags"] == []


def test_seals_and_compactions_of_object_ledgers_are_noted_and_counted_per_bucket(tmp_path):
    """The hook wraps ``ObjectBackend.seal`` and ``Compactions._compact`` as the broker
    imports them; each noted when it ends (failed too), then counted in the
    bucket it ended in."""
    path = tmp_path / "timeline.jsonl"
    code = f"""
import asyncio, importlib.util
spec = importlib.util.spec_from_file_location("t", {str(ROOT / 'bench' / 'broker_timeline.py')!r})
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
timeline = t.install({str(path)!r})
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.compactions import Compactions
assert ObjectBackend.seal.__name__ == Compactions._compact.__name__ == "noted"
class Ledger:
    ledger_id = 1
async def main():
    try:
        await ObjectBackend.seal(object(), Ledger())  # no committer: fails, and is noted all the same
    except AttributeError:
        pass
asyncio.run(main())
assert [kind for kind, _ in timeline.events] == ["seal"]
timeline.flush()
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
    events = broker_timeline.read(str(path))["events"]
    assert [kind for kind, _ in events] == ["seal"]
    t0 = events[0][1] - 0.7
    series = [{"t": 0.0}, {"t": 0.5}, {"t": 1.0}]
    send_series.annotate(series, t0, 0.5, events=events + [("compact", t0 + 0.1), ("compact", t0 + 0.2)])
    assert [(b["seals"], b["compactions"]) for b in series] == [(0, 2), (1, 0), (0, 0)]


def test_a_bucket_without_a_host_reading_prints_a_dash():
    series = [bucket(0.0, 120.0), bucket(0.5, 130.0)]
    series[0]["cpu"] = {"broker": 60, "machine": 80, "steal": 0, "host_us": 1500}
    series[1]["cpu"] = {"broker": 61, "machine": 81, "steal": 1, "host_us": None}  # no probe reading in it
    lines = send_series.table(series, 50.0)
    assert lines[1].split()[-1] == "1500" and lines[2].split()[-1] == "-"
