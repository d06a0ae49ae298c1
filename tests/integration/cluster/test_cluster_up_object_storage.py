"""``magnetar cluster up --storage object``: its own SeaweedFS (or the store
``--object-store`` names), the lines it prints, the brokers pointed at it,
and nothing left running after it stops."""
from __future__ import annotations

import os
import subprocess
import sys
import urllib.request

from magnetar.objectstore.seaweed import SeaweedServer

from magnetar_harness.cluster import LocalCluster


def _cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().decode().split("\0")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _weed_pids(data_dir) -> list[int]:
    """Processes running ``weed mini`` on ``data_dir``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = _cmdline(int(entry))
            except OSError:
                continue
            if "mini" in cmd and f"-dir={data_dir}" in cmd:
                found.append(int(entry))
    return found


def test_cluster_up_starts_its_own_object_store_and_points_the_brokers_at_it(tmp_path):
    base = tmp_path / "c"
    cluster = LocalCluster(base, brokers=2, storage="object", name="demo").start()
    try:
        lines = [line for line in cluster.output if line.split()[0] in ("etcd", "objectstore", "broker", "ready")]
        assert [line.split()[0] for line in lines] == ["etcd", "objectstore", "broker", "broker", "ready"]
        assert cluster.objectstore_bucket == "magnetar"
        assert cluster.objectstore_endpoint.startswith("http://127.0.0.1:")
        # The bucket is there and answers, with its data under <data-dir>/objectstore.
        status = urllib.request.urlopen(f"{cluster.objectstore_endpoint}/magnetar?list-type=2", timeout=10).status
        assert status == 200
        assert (base / "objectstore" / "data").is_dir() and (base / "etcd" / "data").is_dir()
        expected = f"s3://magnetar/demo?endpoint={cluster.objectstore_endpoint}"
        for member in cluster.members:
            cmd = _cmdline(member.pid)
            assert cmd[cmd.index("--object-store") + 1] == expected
        weed = _weed_pids(base / "objectstore" / "data")
        assert len(weed) == 1
    finally:
        assert cluster.stop() == 0
    assert not _alive(weed[0]), "SeaweedFS outlived cluster up"


def test_cluster_up_uses_the_object_store_it_is_given(tmp_path):
    with SeaweedServer(tmp_path / "os", bucket="given") as store:
        url = store.store_url("mine")
        cluster = LocalCluster(tmp_path / "c", brokers=1, object_store=url).start()
        try:
            assert not any(line.startswith("objectstore ") for line in cluster.output)
            assert not (tmp_path / "c" / "objectstore").exists()
            cmd = _cmdline(cluster.members[0].pid)
            assert cmd[cmd.index("--object-store") + 1] == url
        finally:
            assert cluster.stop() == 0


def test_file_storage_is_unchanged(tmp_path):
    cluster = LocalCluster(tmp_path / "c", brokers=1).start()
    try:
        assert not any(line.startswith("objectstore ") for line in cluster.output)
        assert "--object-store" not in _cmdline(cluster.members[0].pid)
        assert not (tmp_path / "c" / "objectstore").exists()
    finally:
        assert cluster.stop() == 0


def _up(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "cluster", "up", *args],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, COLUMNS="200"))


def test_bad_storage_options_are_refused_before_anything_starts(tmp_path):
    done = _up("--storage", "disk", "--data-dir", str(tmp_path / "a"))
    assert done.returncode == 2 and "--storage must be file or object" in done.stderr
    done = _up("--storage", "file", "--object-store", "s3://bucket", "--data-dir", str(tmp_path / "b"))
    assert done.returncode == 2 and "--object-store goes with --storage object" in done.stderr
    done = _up("--object-store", "s3://B", "--data-dir", str(tmp_path / "c"))
    assert done.returncode == 2 and "not a valid bucket name" in done.stderr
    assert not any((tmp_path / d / "etcd").exists() for d in "abc")
