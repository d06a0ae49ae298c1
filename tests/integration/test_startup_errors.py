"""Start-up failures are one line that says what to do, and a non-zero exit."""
from __future__ import annotations

import socket
import subprocess
import sys

from magnetar_harness.broker import standalone_broker


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
    first = standalone_broker(tmp_path / "data").start()
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


def test_an_admin_url_given_where_a_pulsar_url_is_wanted_is_named(tmp_path):
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "produce", "t", "-m", "x", "-u",
                           "http://localhost:8080"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "admin (HTTP) URL" in line and "pulsar://localhost:6650" in line


def test_perf_without_a_broker_says_so_at_once(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "perf", "produce", "-u", f"pulsar://127.0.0.1:{port}",
                           "-d", "1"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert f"no broker at pulsar://127.0.0.1:{port}" in done.stdout + done.stderr


def test_a_setting_in_the_wrong_section_is_one_line_naming_the_right_one(tmp_path):
    config = tmp_path / "broker.toml"
    config.write_text('sync_policy = "always"\n')
    done = standalone("--config", str(config), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2
    assert one_line(done.stderr) == ("configuration error: unknown setting 'sync_policy': sync_policy belongs "
                                     "under [storage], not the top level")
