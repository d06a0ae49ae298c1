"""A streaming copy through the exactly-once sink, killed (SIGKILL, driver,
JVM and Python workers at once) in the middle of a micro-batch and restarted
from its checkpoint three times, then run to the end: the destination holds
every source row exactly once."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import REPO, next_offset, produce

ROWS = 3000
BATCH = 600  # maxOffsetsPerTrigger in copy_job.py


def _start(url: str, checkpoint: Path, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    return subprocess.Popen([sys.executable, str(Path(__file__).with_name("copy_job.py")), url, "kr-src", "kr-dst",
                             str(checkpoint)], env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def _batches(checkpoint: Path, kind: str) -> set[int]:
    """Micro-batch ids in the checkpoint's ``offsets`` (planned: written when a
    batch starts) or ``commits`` (written when it is done)."""
    try:
        return {int(n) for n in os.listdir(checkpoint / kind) if n.isdigit()}
    except FileNotFoundError:
        return set()


def _in_a_batch(checkpoint: Path) -> bool:
    return bool(_batches(checkpoint, "offsets") - _batches(checkpoint, "commits"))


def _kill_when(proc: subprocess.Popen, url: str, checkpoint: Path, at_least: int, timeout_s: float = 240) -> bool:
    """SIGKILL the job's process group once ``kr-dst`` holds ``at_least`` rows
    and a micro-batch is under way (planned in the checkpoint, not committed);
    whether one still was right after the kill."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None:
        seen = next_offset(url, "kr-dst")
        if seen >= at_least and _in_a_batch(checkpoint):
            break
        time.sleep(0.02)
    assert proc.poll() is None, f"the copy ended before it was killed (exit {proc.returncode})"
    assert seen >= at_least, f"the copy wrote only {seen} rows in {timeout_s} s"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    return _in_a_batch(checkpoint)


@pytest.mark.timeout(900)  # four Spark drivers start one after another
def test_copy_killed_mid_batch_three_times_holds_every_row_once(spark, broker, client, tmp_path):
    url = broker.service_url
    produce(client, "kr-src", ROWS, pad=80)
    checkpoint = tmp_path / "ckpt"
    log = tmp_path / "copy.log"
    mid_batch = []
    for target in (BATCH, 2 * BATCH, 3 * BATCH):
        mid_batch.append(_kill_when(_start(url, checkpoint, log), url, checkpoint, target))
    # Killed inside a batch at least once (a kill between two batches tests less).
    assert any(mid_batch), mid_batch
    final = _start(url, checkpoint, log)
    assert final.wait(300) == 0, log.read_text()[-3000:]
    stats = spark.read.format("magnetar").option("service_url", url).option("topic", "kr-dst").load() \
        .selectExpr("count(*) as n", "count(distinct value) as distinct_values").first()
    assert (stats.n, stats.distinct_values) == (ROWS, ROWS), (stats, mid_batch)
