"""Data written by an earlier Magnetar is read by today's: the v1 fixtures
(tests/fixtures/formats/v1, written by 6f22db8 with make_v1.py, before
records carried a ``format`` field; v2/object: object storage's layout
format 2, commit records and writer fences; v3, written by make_v3.py: on
files a broker killed with its journal not yet in its segment files, on
object storage layout 3, ledgers compacted into chunk objects and into
index objects) are opened by a broker of this code,
which reads every message, cursor, policy, schema and producer sequence
back (files: a standalone broker; object storage: a cluster member on a
fresh etcd and SeaweedFS loaded with the fixture). And a broker that meets
a format newer than it knows stops with one line and changes nothing."""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from magnetar.metadata.etcd_server import EtcdServer
from magnetar.metadata.sqlite import SqliteMetadataStore
from magnetar_harness.broker import standalone_broker
from magnetar_harness.cluster import LocalCluster
from magnetar_harness.objectstore import start_seaweed
from tests.fixtures.formats.data_set import check, load_object_data_set
from tests.fixtures.formats.make_v1 import CLUSTER

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "formats" / "v1"
#: Object storage's layout format 2 (commit records, writer fences), written by make_v1.make_object.
V2 = V1.parent / "v2"
#: Journal files on files; object layout 3 (chunk and index objects): make_v3.py.
V3 = V1.parent / "v3"


def test_the_v3_fixtures_hold_what_they_stand_for():
    """A journal with entries on files; both kinds of compacted ledgers on object storage."""
    assert any(p.stat().st_size for p in (V3 / "files" / "journal").rglob("*.jnl"))
    keys = json.loads((V3 / "object" / "metadata.json").read_text())["keys"]
    markers = [json.loads(base64.b64decode(v)) for k, v in keys.items() if k.endswith("/compacted")]
    assert any("index" in m for m in markers) and any("index" not in m for m in markers), markers
    objects = {p.relative_to(V3 / "object" / "objects").as_posix()
               for p in (V3 / "object" / "objects").rglob("*") if p.is_file()}
    ledgers = [k for k in objects if k.startswith("ledgers/")]
    assert any(k.endswith("/index") for k in ledgers) and any(k.rpartition("/")[2].isdigit() for k in ledgers)


@pytest.mark.parametrize("fixture", [V1, V2, V3], ids=["v1", "v2", "v3"])
def test_no_object_fixture_holds_a_ledger_retention_may_delete(fixture):
    """The data set's namespace keeps consumed ledgers 60 minutes, and a
    fixture's ledgers were closed when it was written: one wholly at or
    below every cursor's mark-delete position is deleted when the fixture is
    loaded an hour later, and the read-back misses its entries (v3's first
    one did, with ledgers of at most 10 sections)."""
    keys = json.loads((fixture / "object" / "metadata.json").read_text())["keys"]
    docs = {k: json.loads(base64.b64decode(v)) for k, v in keys.items() if k.startswith("/managed-ledgers/")}
    for name, doc in docs.items():
        if "/cursors/" in name:
            continue
        marks = [tuple(c["mark_delete"]) for k, c in docs.items() if k.startswith(name + "/cursors/")]
        for ledger in doc["ledgers"]:
            last = (ledger["id"], ledger.get("entries", 0) - 1)
            assert not (marks and all(last <= mark for mark in marks)), f"{name}: ledger {ledger} is consumed"


@pytest.mark.parametrize("fixture", [V1, V3], ids=["v1", "v3"])
def test_a_data_directory_on_files_reads_back(tmp_path, fixture):
    data = tmp_path / "data"
    shutil.copytree(fixture / "files", data)  # opening recovers and writes: never the fixture itself
    broker = standalone_broker(data).start()
    try:
        check(broker.service_url, broker.admin_url)
    finally:
        assert broker.stop() == 0


@pytest.mark.parametrize("fixture", [V1, V2, V3], ids=["v1", "v2", "v3"])
def test_a_data_set_on_object_storage_reads_back(tmp_path, fixture):
    etcd = EtcdServer(tmp_path / "etcd").start()
    seaweed = start_seaweed(tmp_path / "seaweed")
    try:
        asyncio.run(load_object_data_set(fixture / "object", etcd.store_url(CLUSTER), seaweed.store_url(CLUSTER)))
        cluster = LocalCluster(tmp_path / "cluster", brokers=1, session_ttl=3.0, name=CLUSTER,
                               etcd=etcd.client_url, object_store=seaweed.store_url(CLUSTER)).start()
        try:
            m = cluster.members[0]
            check(m.service_url, m.admin_url)
        finally:
            cluster.stop()
    finally:
        seaweed.stop()
        etcd.stop()


def _digests(directory: Path) -> dict:
    """The segment files' bytes and the metadata's rows (not the sqlite file's
    bytes: opening it runs an empty write transaction that rewrites its header)."""
    out: dict = {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted((directory / "ledgers").rglob("*")) if p.is_file()}
    conn = sqlite3.connect(f"file:{directory / 'metadata.db'}?mode=ro", uri=True)
    try:
        out["kv"] = sorted(conn.execute("SELECT key, value FROM kv").fetchall())
        out["counters"] = sorted(conn.execute("SELECT key, value FROM counters").fetchall())
    finally:
        conn.close()
    return out


def test_a_broker_meeting_a_newer_format_stops_with_one_line_and_touches_nothing(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(V1 / "files", data)

    async def mark_newer() -> None:
        store = await SqliteMetadataStore.open(data / "metadata.db")
        try:
            await store.put("/admin/data-format", json.dumps(
                {"format": 1, "kinds": {"segment_files": 2, "cursors": 1}}).encode())
        finally:
            await store.close()

    asyncio.run(mark_newer())
    before = _digests(data)
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(data),
                           "--port", "0", "--admin-port", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert "segment files at /admin/data-format is in format 2, newer than this Magnetar reads (up to 1)" \
        in errors[0], errors
    assert "Traceback" not in done.stderr and "READY" not in done.stdout
    assert _digests(data) == before, "the broker changed the data it refused"
