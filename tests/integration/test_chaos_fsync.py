"""The ``fsync-error`` fault (magnetar_chaos/fsync.py) on the real kernel:
the traced process gets EIO from fdatasync and is left running, untraced;
a short chaos run with the fault injects it and finds no anomaly; and a
producer sending while the broker's fdatasync fails never holds a receipt
for an entry a ``kill -9`` and restart then lose. Needs ptrace (skipped
otherwise)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pulsar
import pytest

from magnetar_chaos.fsync import FsyncErrors, FsyncFault, _proc_state, unavailable_reason

from tests.helpers import quiet_logger, wait_for


REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=str(REASON))

#: A process that fdatasyncs a file in a loop and prints each outcome.
SYNCER = """
import os, sys, tempfile, time
fd, _ = tempfile.mkstemp()
print("ready", flush=True)
while True:
    os.write(fd, b"x")
    try:
        os.fdatasync(fd)
        print("ok", flush=True)
    except OSError as exc:
        print(f"errno {exc.errno}", flush=True)
    time.sleep(0.005)
"""


def test_the_traced_process_gets_eio_and_is_left_running_untraced():
    proc = subprocess.Popen([sys.executable, "-c", SYNCER], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    injector = FsyncErrors()
    try:
        wait_for(lambda: "ok\n" in lines, what="the syncer's first fdatasync")
        failed = injector.inject(proc.pid, FsyncFault(hold_s=1.0, every=1))
        assert failed > 0
        assert "errno 5\n" in lines  # EIO, as a failing disk gives it
        state, tracer = _proc_state(proc.pid)
        assert tracer == 0 and state not in "Tt", f"left {state}, traced by {tracer}"
        seen = len(lines)
        wait_for(lambda: lines[seen:].count("ok\n") >= 3, what="good fdatasyncs after the fault")
    finally:
        injector.close()
        proc.kill()
        proc.wait()


def test_a_short_run_injects_fsync_errors_and_finds_no_anomaly(tmp_path):
    """~20 s of the standalone workloads with fsync errors every 1-2 s."""
    out = tmp_path / "chaos"
    result = subprocess.run(
        [sys.executable, "-m", "magnetar_chaos", "run", "--duration", "15", "--interval", "1,2",
         "--faults", "fsync-error", "--seed", "5", "--out", str(out)],
        capture_output=True, text=True, timeout=240)
    run_dir = out / "seed-5"
    report = json.loads((run_dir / "report.json").read_text())
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert report["clean"], report
    assert report["faults"].get("fsync-error", 0) >= 1, report["faults"]
    heals = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
             if '"heal"' in line]
    failed = sum(int(h["value"].rsplit(", ", 1)[1].split()[0]) for h in heals
                 if h["value"].startswith("fsync-error"))
    assert failed > 0, heals  # the broker's syncs did fail, not just a strace attached


def _enable_deduplication(admin_url: str) -> None:
    req = urllib.request.Request(f"{admin_url}/admin/v2/namespaces/public/default/deduplication",
                                 data=b"true", method="POST", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()


def test_no_receipt_for_an_entry_lost_after_failed_fsyncs_and_kill_minus_nine(broker):
    """Sends flow while every fdatasync and fsync of the broker fails for 2 s;
    the broker refuses what it cannot sync (the client resends), serves on,
    then dies by SIGKILL. After the restart every receipted message is read
    back at the position its receipt named, exactly once (deduplication on)."""
    _enable_deduplication(broker.admin_url)
    topic = "persistent://public/default/fsync-errors"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
    producer = client.create_producer(topic, producer_name="fsync-writer", batching_enabled=False,
                                      send_timeout_millis=0, max_pending_messages=100,
                                      block_if_queue_full=True, initial_sequence_id=1)
    receipts: dict[int, tuple[int, int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def sent(i):
        def callback(res, msg_id):
            if res == pulsar.Result.Ok:
                with lock:
                    receipts[i] = (msg_id.ledger_id(), msg_id.entry_id())
        return callback

    def produce():
        i = 0
        while not stop.is_set():
            try:
                producer.send_async(str(i).encode(), sent(i))
            except Exception:  # the client was closed under it
                return
            i += 1

    sender = threading.Thread(target=produce, daemon=True)
    sender.start()
    wait_for(lambda: len(receipts) >= 300, timeout=60, what="300 receipts before the fault")
    injector = FsyncErrors()
    try:
        failed = injector.inject(broker.proc.pid, FsyncFault(hold_s=2.0, every=1))
    finally:
        injector.close()
    assert failed > 0
    assert broker.alive, f"the broker died of EIO:\n{broker.notable_log()}"
    # The whole log (broker.log() is its tail, which the retries that follow can push this out of).
    # The failed fsync is the journal's (one per group commit, the default), reported per ledger it covered.
    wait_for(lambda: "failed (in the journal)" in broker.log_path.read_text(errors="replace"),
             what="the broker's report of its failed journal fsync")
    after = len(receipts)
    wait_for(lambda: len(receipts) >= after + 300, timeout=60,
             what=f"300 more receipts after the fault; log:\n{broker.notable_log()}")
    broker.kill()
    stop.set()
    with lock:
        receipted = dict(receipts)
    client.close()
    sender.join(30)

    broker.restart(crash=True)
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        stored: dict[int, list[tuple[int, int]]] = {}
        while reader.has_message_available():
            msg = reader.read_next(10_000)
            stored.setdefault(int(msg.data()), []).append((msg.message_id().ledger_id(),
                                                           msg.message_id().entry_id()))
    finally:
        client.close()
    lost = sorted(i for i in receipted if i not in stored)
    moved = sorted(i for i, pos in receipted.items() if i in stored and pos not in stored[i])
    twice = sorted(i for i, positions in stored.items() if len(positions) > 1)
    assert not lost, f"{len(lost)} receipted messages lost, e.g. {lost[:10]}"
    assert not moved, f"{len(moved)} read elsewhere than their receipt said, e.g. {moved[:10]}"
    assert not twice, f"{len(twice)} stored twice, e.g. {twice[:10]}"
