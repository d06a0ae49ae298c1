"""Start-up failures are one line that says what to do, and a non-zero exit."""
from __future__ import annotations

import socket
import subprocess
import sys

from .broker_process import BrokerProcess


def standalone(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "standalone", *args],
                          capture_output=True, text=True, timeout=timeout)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and "INFO" not in line]
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def test_a_busy_port_is_named_with_the_flag_that_changes_it(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = standalone("--data-dir", str(tmp_path / "d"), "--port", str(port), "--admin-port", "0")
        assert done.returncode != 0
        line = one_line(done.stderr)
        assert f"port {port}" in line and "--port" in line and "already in use" in line
        done = standalone("--data-dir", str(tmp_path / "e"), "--port", "0", "--admin-port", str(port))
        assert done.returncode != 0
        line = one_line(done.stderr)
        assert f"port {port}" in line and "--admin-port" in line


def test_a_second_broker_on_the_same_data_directory_names_the_first(tmp_path):
    first = BrokerProcess(tmp_path / "data").start()
    try:
        done = standalone("--data-dir", str(tmp_path / "data"), "--port", "0", "--admin-port", "0")
        assert done.returncode != 0
        line = one_line(done.stderr)
        assert f"process {first.proc.pid}" in line and "--data-dir" in line
    finally:
        first.stop()


def test_version_is_printed():
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "--version"], capture_output=True, text=True,
                          timeout=60)
    from magnetar import __version__
    assert done.returncode == 0 and done.stdout.strip() == f"magnetar {__version__}"
