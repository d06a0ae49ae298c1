"""Deleting a ledger never lists the ledger directory: it holds two or three
files per ledger (300,000 names at 100,000 topics), and a topic recovered
after a crash deletes its empty ledgers on its first use, so a listing made
that first use wait on the topic count."""
from __future__ import annotations

import os
import sys

from magnetar.storage.file.ledger import SEAL_TMP, Ledger, delete_ledger_files, index_path, log_path

_listed: list[str] = []
_watching = False


def _audit(event: str, args: tuple) -> None:
    if _watching and event in ("os.listdir", "os.scandir"):
        _listed.append(os.path.basename(os.fspath(args[0] if args and args[0] is not None else ".")))


sys.addaudithook(_audit)  # cannot be removed; inert unless _watching


async def test_a_crash_recovery_deletes_the_empty_ledger_without_listing_the_directory(factories):
    global _watching
    factory = factories()
    ml = await factory.open("t/ns/persistent/a")
    await ml.append(b"kept")
    await ml.close()  # sealed: an index went through the temporary directory
    second = factories()
    reopened = await second.open("t/ns/persistent/a")  # a new, empty open ledger
    empty_id = reopened.ledgers[-1].ledger_id
    # A crash left a half-written index of that ledger, and of another one.
    (factory.backend.ledger_dir / SEAL_TMP / f"{empty_id:020d}.idx.0a1b2c.tmp").write_bytes(b"torn")
    (factory.backend.ledger_dir / SEAL_TMP / f"{empty_id + 1000:020d}.idx.0a1b2c.tmp").write_bytes(b"other")
    second.abandon()

    _listed.clear()
    _watching = True
    try:
        again = await factories().open("t/ns/persistent/a")
    finally:
        _watching = False
    assert "ledgers" not in _listed, _listed
    assert empty_id not in [m.ledger_id for m in again.ledgers]
    assert not log_path(factory.backend.ledger_dir, empty_id).exists()
    assert sorted(os.listdir(factory.backend.ledger_dir / SEAL_TMP)) == [f"{empty_id + 1000:020d}.idx.0a1b2c.tmp"]
    assert [e.data for e in await again.read_entries(again.first_position(), 10)] == [b"kept"]


def test_a_seal_leaves_no_temporary_file(tmp_path):
    ledger = Ledger.create(tmp_path, 7)
    ledger.write_entries([b"x"])
    ledger.sync()
    ledger.seal()
    ledger.close()
    assert index_path(tmp_path, 7).exists()
    assert os.listdir(tmp_path / SEAL_TMP) == []
    delete_ledger_files(tmp_path, 7)
    assert sorted(os.listdir(tmp_path)) == [SEAL_TMP]
