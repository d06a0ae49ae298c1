"""examples/leader_election as 3 processes; the leader is killed -9 several times."""
from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pulsar

from tests.helpers import wait_for
from .topic_log import read_topic

SERVICE = Path(__file__).resolve().parents[2] / "examples" / "leader_election" / "service.py"
TOPIC = "leader-election-log"


class Instance:
    def __init__(self, broker, ident: str, state_dir: Path, events: queue.Queue) -> None:
        self.ident = ident
        self.state_file = state_dir / f"state-{ident}.json"
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVICE), "--id", ident, "--service-url", broker.service_url,
             "--topic", TOPIC, "--state-file", str(self.state_file)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        )
        self.watcher = threading.Thread(target=self._watch, args=(events,), daemon=True)
        self.watcher.start()

    def _watch(self, events: queue.Queue) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith("FOLLOWER "):
                self.ready.set()
            if line.startswith(("LEADER ", "FENCED ")):
                events.put((self, line))


def test_leaders_write_segments_never_interleaved_and_states_agree(broker, tmp_path):
    events: queue.Queue = queue.Queue()
    instances = {i: Instance(broker, i, tmp_path, events) for i in "abc"}
    client = pulsar.Client(broker.service_url)
    leaders = []
    for round_ in range(4):
        leader, line = events.get(timeout=60)
        assert line.startswith("LEADER"), line
        leaders.append(line.split()[2])
        # Let it write a while, then crash it and start a fresh process in its place.
        consumer_count = _log_length(client)
        wait_for(lambda: _log_length(client) >= consumer_count + 50, timeout=60, what="the leader's updates")
        if round_ < 3:
            leader.proc.kill()
            leader.proc.wait()
            instances[leader.ident] = Instance(broker, leader.ident, tmp_path, events)
    for inst in instances.values():
        assert inst.ready.wait(60), f"instance {inst.ident} never started"
    # All told at once: a follower told only after the leader had gone would
    # be promoted first, and lead a session of its own.
    for inst in instances.values():
        inst.proc.send_signal(signal.SIGTERM)
    for inst in instances.values():
        assert inst.proc.wait(60) == 0
        inst.watcher.join(10)
    while not events.empty():  # promoted all the same, just before its SIGTERM arrived
        _inst, line = events.get_nowait()
        assert line.startswith("LEADER"), line
        leaders.append(line.split()[2])

    log = _read_log(client)
    client.close()
    # One segment per successive leader (instance + incarnation), never resumed.
    sessions = []
    for update in log:
        ident, incarnation, n, _key = update.split(":")
        if not sessions or sessions[-1][0] != (ident, incarnation):
            assert (ident, incarnation) not in [s[0] for s in sessions], "a leader wrote after being replaced"
            sessions.append(((ident, incarnation), []))
        sessions[-1][1].append(int(n))
    assert [s[0][1] for s in sessions] == leaders
    for _session, numbers in sessions:
        assert numbers == list(range(len(numbers))), "a leader's updates are missing or out of order"
    # Every instance's state is the log's, up to where it stopped reading (a
    # follower stops when told; the leader may store an update after that);
    # the last leader's is all of it. A new leader missing an update of the
    # one before (stored after its bootstrap read the log's end) disagrees.
    applied = []
    for inst in instances.values():
        state = json.loads(inst.state_file.read_text())
        assert state["counts"] == _replay(log[:state["applied"]]), f"instance {inst.ident} disagrees with the log"
        applied.append(state["applied"])
    assert max(applied) == len(log)


def _replay(updates: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for update in updates:
        key = update.rsplit(":", 1)[1]
        counts[key] = counts.get(key, 0) + 1
    return counts


def _read_log(client) -> list[str]:
    return [body.decode() for body in read_topic(client, TOPIC)]


def _log_length(client) -> int:
    return len(_read_log(client))
