"""The file journal end to end: a broker's receipts survive a crash that
took what the segment files had not synced, because the restart replays
the journal into them before any topic loads.

A power loss is modelled by a ``kill -9`` followed by cutting every unsealed
segment file to empty: the checkpoint never ran (a one-hour interval), so
nothing of theirs was ever fsynced. Without the journal's replay every
receipted message of the run is gone."""
from __future__ import annotations

import os
import re
import threading
import urllib.request
from pathlib import Path

import pulsar

from magnetar_harness.broker import configured_broker
from tests.helpers import close_after_kill, quiet_logger, stop_broker, wait_for

TOPICS = 20
CONFIG = "[storage]\njournal_checkpoint_interval_ms = 3600000\n"


def _cut_unsynced_segment_files(data_dir: Path) -> int:
    cut = 0
    for log in data_dir.rglob("ledgers/*.log"):
        if not log.with_suffix(".idx").exists() and log.stat().st_size:
            os.truncate(log, 0)
            cut += 1
    return cut


def _fsyncs(admin_url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{admin_url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'^magnetar_file_fsyncs_total\{kind="(\w+)"\} (\S+)$', text, re.M)}


def test_receipts_survive_a_crash_that_lost_the_unsynced_segment_files(tmp_path):
    broker = configured_broker(tmp_path, CONFIG).start()
    try:
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
        producers = [client.create_producer(f"journal-{t}", batching_enabled=False, send_timeout_millis=0,
                                            block_if_queue_full=True, max_pending_messages=200)
                     for t in range(TOPICS)]
        receipts: dict[int, set[int]] = {t: set() for t in range(TOPICS)}
        lock = threading.Lock()

        def sent(t, i):
            def callback(res, _msg_id):
                if res == pulsar.Result.Ok:
                    with lock:
                        receipts[t].add(i)
            return callback

        for i in range(100):
            for t, producer in enumerate(producers):
                producer.send_async(str(i).encode(), sent(t, i))
        for producer in producers:
            producer.flush()
        fsyncs = _fsyncs(broker.admin_url)
        # One journal fsync per group commit for all twenty topics; no segment file synced yet.
        assert fsyncs["journal"] > 0 and fsyncs["segment"] == 0, fsyncs
        broker.kill()
        close_after_kill(client)
        assert sum(map(len, receipts.values())) == TOPICS * 100
        assert _cut_unsynced_segment_files(broker.data_dir) >= TOPICS

        broker.start()
        wait_for(lambda: "replayed 1 journal(s)" in broker.log_path.read_text(errors="replace"),
                 what="the journal replayed at start")
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
        for t in range(TOPICS):
            reader = client.create_reader(f"journal-{t}", pulsar.MessageId.earliest)
            stored = []
            while reader.has_message_available():
                stored.append(int(reader.read_next(5000).data()))
            assert stored == sorted(receipts[t]), f"topic {t}: {len(stored)} of {len(receipts[t])} receipts back"
        client.close()
    finally:
        stop_broker(broker)
