"""``magnetar perf ... --driver raw`` against a real broker: every message the
raw generator counts as acked is stored, in order, with the size asked for,
and reads back with the official client."""
from __future__ import annotations

import json
import subprocess
import sys

from magnetar.perf.payload import filler, stamp_of

from .topic_log import read_topic

MESSAGES = 20_000


def _perf(broker, tmp_path, command: str, topic: str, *extra: str) -> dict:
    out = tmp_path / f"{command}.json"
    cmd = [
        sys.executable, "-m", "magnetar.cli", "perf", command, "--driver", "raw",
        "--service-url", broker.service_url, "--topic", topic, "--messages", str(MESSAGES), "--duration", "0",
        "--batch-max-messages", "1000", "--json", str(out), "--broker-pid", str(broker.proc.pid), *extra,
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["driver"] == "magnetar.perf.raw_driver"
    assert result["errors"] == []
    return result


def test_raw_produce_stores_every_message(broker, tmp_path):
    result = _perf(broker, tmp_path, "produce", "raw-produce", "--size", "100", "--ceiling", "1")
    produced = result["produce"]
    assert produced["messages"] == MESSAGES and produced["errors"] == 0
    assert produced["bytes"] == MESSAGES * 100 and produced["msg_per_s"] > 0
    # One latency sample per entry: 20 full batches of 1000.
    assert produced["latency_ms"]["count"] == MESSAGES // 1000
    # The raw generator's own ceiling was measured with the raw driver.
    assert result["ceiling"]["driver"] == "magnetar.perf.raw_driver" and result["ceiling"]["msg_per_s"] > 0
    assert result["ceiling"]["errors"] == []

    bodies = read_topic(broker.service_url, "raw-produce")
    assert len(bodies) == MESSAGES
    assert all(body == filler(100) for body in bodies)


def test_raw_e2e_stores_stamped_messages_in_order(broker, tmp_path):
    # Paced: one entry per millisecond with what is due, each stamped with
    # its first message's due time, so stamps rise entry by entry.
    result = _perf(broker, tmp_path, "e2e", "raw-e2e", "--size", "64", "--rate", "20000", "--ceiling", "0")
    assert result["produce"]["messages"] == MESSAGES and result["produce"]["errors"] == 0
    assert result["consume"]["messages"] == MESSAGES  # the official client received them all
    entries = result["produce"]["latency_ms"]["count"]

    bodies = read_topic(broker.service_url, "raw-e2e")
    assert len(bodies) == MESSAGES
    assert all(len(body) == 64 and body[8:] == filler(64)[8:] for body in bodies)
    stamps = [stamp_of(body) for body in bodies]
    assert None not in stamps
    assert stamps == sorted(stamps), "messages read back out of send order"
    assert len(set(stamps)) == entries  # every entry stored whole, none twice


def test_raw_unbatched_sends_one_entry_per_message(broker, tmp_path):
    """``--no-batching``: plain SENDs, many per write, each acknowledged on its own."""
    result = _perf(broker, tmp_path, "produce", "raw-plain", "--size", "100", "--no-batching", "--ceiling", "0",
                   "--max-pending", "3000")
    produced = result["produce"]
    assert produced["messages"] == MESSAGES and produced["errors"] == 0
    assert produced["latency_ms"]["count"] == MESSAGES  # one receipt (one entry) per message
    broker_cpu = result["broker"]
    assert broker_cpu["cpu_us_per_entry"] == broker_cpu["cpu_us_per_message"] > 0

    bodies = read_topic(broker.service_url, "raw-plain")
    assert bodies == [filler(100)] * MESSAGES
