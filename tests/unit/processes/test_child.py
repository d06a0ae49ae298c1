"""A child server's lifecycle (magnetar/processes/child.py): a paused child
answers nothing from the moment pause() returns, whatever its threads do."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from magnetar.processes import child
from magnetar_harness.waiting import wait_for

#: Eight threads spinning (as a Go server's runtime threads may), and a line once they run.
SPINNERS = ("import threading, sys\n"
            "def spin():\n"
            "    while True: pass\n"
            "for _ in range(8): threading.Thread(target=spin, daemon=True).start()\n"
            "print('spinning', flush=True)\n"
            "threading.Event().wait()\n")


def thread_states(pid: int) -> list[str]:
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
    return states


class Spinners(child.ChildServer):
    what = "spinners"

    def start(self, start_timeout: float = 30.0) -> "Spinners":
        self._spawn([sys.executable, "-c", SPINNERS], self._spinning, start_timeout, RuntimeError)
        return self

    def _spinning(self) -> bool:
        return "spinning" in self.log_path.read_text()


def test_pause_returns_once_every_thread_is_stopped_and_resume_lets_them_run(tmp_path):
    for _ in range(20):  # the stop is asynchronous: a bare kill() often returned with threads still running
        with Spinners(tmp_path / "spin.log") as server:
            server.pause()
            assert set(thread_states(server.process.pid)) == {"T"}
            server.resume()
            # SIGCONT too is delivered as each thread is next scheduled: wait
            # until none is stopped (running, sleeping, or in the kernel: D).
            wait_for(lambda: not {"T", "t"} & set(thread_states(server.process.pid)), 10,
                     what="every thread running again")
        assert not server.running


def test_a_server_not_running_cannot_be_paused_and_stops_idempotently(tmp_path):
    server = Spinners(tmp_path / "spin.log")
    with pytest.raises(RuntimeError, match="spinners is not running"):
        server.pause()
    server.start()
    server.kill()
    assert not server.running
    server.stop()  # nothing left to stop
    with pytest.raises(RuntimeError, match="spinners is not running"):
        server.resume()
