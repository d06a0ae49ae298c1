"""bench/gc_census.py: the collector's pauses and what its middle passes walk."""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from bench import gc_census

ROOT = Path(__file__).resolve().parents[3]


class Holder:
    def __init__(self) -> None:
        self.rows = [[i, [i]] for i in range(3000)]


def test_a_middle_collection_is_timed_and_counted_by_kind_and_holder(tmp_path):
    held = Holder()
    gc.collect()
    census = gc_census.install(str(tmp_path / "census-{pid}.json"), counts=1)
    try:
        fresh = Holder()  # in generation 0 when the middle collection starts
        gc.collect(1)
        gc.collect(1)
    finally:
        gc.callbacks.remove(census)
    middle = [c for c in census.collections if c[1] == 1]
    assert len(middle) == 2 and all(c[2] >= 0 for c in middle)
    assert len(census.censuses) == 1  # counts=1: the second collection is only timed
    found = census.censuses[0]
    assert found["generations"] == [0, 1]
    assert found["by_kind"]["list"] >= 6000
    assert any(how.endswith("Holder.rows") for how in found["holders"]["list"]), found["holders"]
    written = json.loads((tmp_path / f"census-{os.getpid()}.json").read_text())
    assert written["censuses"][0]["objects"] == found["objects"]
    assert held.rows and fresh.rows


def test_window_keeps_the_collections_of_the_sending():
    summary = {"collections": [(1.0, 0, 5.0, 0), (2.0, 1, 100.0, 0), (3.0, 0, 7.0, 2), (9.0, 1, 50.0, 0)],
               "censuses": []}
    inside = gc_census.window(summary, 1.5, 3.5)
    assert inside["0"] == {"n": 1, "total_ms": 7.0, "p50_ms": 7.0, "max_ms": 7.0, "collected": 2}
    assert inside["middle_and_full_ms"] == [100.0]
    assert "gen1: 1 x" in gc_census.brief(summary, 1.5, 3.5)


def test_the_hook_installs_itself_in_a_broker_process_only(tmp_path):
    env = dict(os.environ, **gc_census.hook_env(str(tmp_path / "b-{pid}.json")))
    broker = subprocess.run([sys.executable, "-m", "magnetar.cli", "broker", "--help"], env=env, cwd=ROOT,
                            capture_output=True, timeout=120)
    other = subprocess.run([sys.executable, "-m", "magnetar.cli", "--help"], env=env, cwd=ROOT,
                           capture_output=True, timeout=120)
    assert broker.returncode == 0 and other.returncode == 0, broker.stderr + other.stderr
    written = list(tmp_path.glob("b-*.json"))
    assert [p.name for p in written] == [f"b-{json.loads(written[0].read_text())['pid']}.json"]
    assert gc_census.is_broker(["python", "-m", "magnetar.cli", "standalone"])
    assert gc_census.is_broker(["/usr/bin/python3", "/x/.venv/bin/magnetar", "broker", "--port", "1"])
    assert not gc_census.is_broker(["python", "-m", "magnetar.cli", "cluster", "up"])
    assert not gc_census.is_broker(["python", "-m", "magnetar.perf", "broker"])


def test_counts_wait_for_the_mark_and_only_the_first_looks_up_holders(tmp_path):
    mark = tmp_path / "sending"
    census = gc_census.install(str(tmp_path / "c.json"), counts=5, holders=1, counts_from=str(mark))
    try:
        gc.collect(1)
        assert census.censuses == [] and any(c[1] == 1 for c in census.collections)
        mark.touch()
        gc.collect(1)
        gc.collect(1)
    finally:
        gc.callbacks.remove(census)
    assert len(census.censuses) == 2
    assert census.censuses[0]["holders"] and census.censuses[1]["holders"] == {}
