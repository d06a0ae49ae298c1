"""SIGUSR1 makes a broker log every asyncio task's stack and go on serving:
what a stop that overran (the harness sends it before SIGKILL) was waiting on."""
from __future__ import annotations

import signal

from magnetar_harness.broker import configured_broker
from tests.helpers import wait_for


def test_sigusr1_logs_the_tasks_and_the_broker_goes_on(tmp_path):
    broker = configured_broker(tmp_path, "").start()
    try:
        broker.proc.send_signal(signal.SIGUSR1)
        wait_for(lambda: "SIGUSR1:" in broker.log_path.read_text(), timeout=20, what="the task dump in the log")
        text = broker.log_path.read_text()
        assert "asyncio tasks" in text and "Stack for <Task" in text
        assert broker.proc.poll() is None  # still serving
    finally:
        assert broker.stop() == 0
