"""Failed fsyncs (EIO), on real files: the storage half of the chaos
harness's ``fsync-error`` fault. The failure is made at the one call the
ledgers sync through (``ledger._datasync``, fdatasync) and, for "the whole
disk fails", at ``os.fsync`` too (seals, new ledgers' directory entries).

The promise: a completed append is on disk; an append whose sync failed is
reported failed and is never read back, not even after a crash and
recovery; the managed ledger goes on in a new ledger."""
from __future__ import annotations

import asyncio
import errno
import os

import pytest

from magnetar.storage import ManagedLedgerFailedError, StorageError
from magnetar.storage.file import ledger as ledger_module


class FailingDisk:
    """While ``failing``, the patched sync calls raise EIO without syncing."""

    def __init__(self, monkeypatch, *, fsync_too: bool) -> None:
        self.failing = False
        self.failed = 0
        real_datasync, real_fsync = ledger_module._datasync, os.fsync

        def wrap(real):
            def call(fd):
                if self.failing:
                    self.failed += 1
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
                return real(fd)
            return call

        monkeypatch.setattr(ledger_module, "_datasync", wrap(real_datasync))
        if fsync_too:
            monkeypatch.setattr(os, "fsync", wrap(real_fsync))


async def _read_all(ml) -> list[bytes]:
    first = ml.first_position()
    return [e.data for e in await ml.read_entries(first, 10_000)] if first is not None else []


async def test_appends_whose_fdatasync_fails_are_refused_and_later_ones_go_to_a_new_ledger(factories, monkeypatch):
    disk = FailingDisk(monkeypatch, fsync_too=False)
    factory = factories()
    ml = await factory.open("t")
    for i in range(3):
        await ml.append(b"ok%d" % i)
    broken = ml.ledgers[-1].ledger_id
    disk.failing = True
    outcomes = await asyncio.gather(*(ml.append(b"bad%d" % i) for i in range(5)), return_exceptions=True)
    disk.failing = False
    assert disk.failed and all(isinstance(o, StorageError) for o in outcomes), outcomes
    later = await ml.append(b"later")
    assert later.ledger_id > broken
    assert {i.ledger_id: i.entries for i in ml.ledgers}[broken] == 3
    assert await _read_all(ml) == [b"ok0", b"ok1", b"ok2", b"later"]
    # kill -9, then recovery: nothing refused comes back, nothing acknowledged is missing
    factory.abandon()
    ml2 = await factories().open("t")
    assert await _read_all(ml2) == [b"ok0", b"ok1", b"ok2", b"later"]


async def test_a_failing_disk_fails_the_managed_ledger_and_a_reopen_serves_again(factories, monkeypatch):
    """Every sync fails: the appends, then the rollover's seal and the new
    ledger's directory sync. The managed ledger refuses appends (the broker
    unloads the topic) and, opened again once the disk heals, holds exactly
    what was acknowledged, and takes appends."""
    disk = FailingDisk(monkeypatch, fsync_too=True)
    factory = factories()
    ml = await factory.open("t")
    acked = [b"ok%d" % i for i in range(4)]
    for data in acked:
        await ml.append(data)
    disk.failing = True
    outcomes = await asyncio.gather(*(ml.append(b"bad%d" % i) for i in range(3)), return_exceptions=True)
    assert all(isinstance(o, StorageError) for o in outcomes), outcomes
    for _ in range(200):  # the rollover runs in the background; it fails or waits
        if ml.state == "failed":
            break
        await asyncio.sleep(0.01)
    assert ml.state == "failed"
    with pytest.raises(ManagedLedgerFailedError):
        await ml.append(b"refused")
    disk.failing = False
    await ml.close()
    ml2 = await factory.open("t")
    assert await _read_all(ml2) == acked
    await ml2.append(b"after")
    factory.abandon()
    ml3 = await factories().open("t")
    assert await _read_all(ml3) == acked + [b"after"]


async def test_interval_policy_a_failed_periodic_fdatasync_fences_the_ledger_and_appends_move_on(
        factories, monkeypatch, wait_until):
    """Under ``interval`` an append completes after write(); a periodic sync
    that fails cannot take that back (the policy's trade-off), but the
    ledger is fenced: nothing more is written to it, appends fail until
    the managed ledger has rolled to a new ledger, and the topic goes on."""
    disk = FailingDisk(monkeypatch, fsync_too=False)
    factory = factories(sync_policy="interval", sync_interval_ms=5)
    ml = await factory.open("t")
    await ml.append(b"a")
    broken = ml.ledgers[-1].ledger_id
    disk.failing = True
    written = [b"a"]
    try:
        await ml.append(b"b")  # completed by write(); its sync will fail
        written.append(b"b")
    except StorageError:
        pass  # the 5 ms syncer met "a" first, failed and fenced: b was refused, never written
    await wait_until(lambda: ml._appends.current.state.value == "fenced", what="the ledger fenced by the syncer")
    disk.failing = False
    outcomes = []
    for _ in range(2):  # the first append meets the fenced ledger; a later one the new ledger
        try:
            outcomes.append(await ml.append(b"c"))
            break
        except StorageError as exc:
            outcomes.append(exc)
    assert outcomes[-1].ledger_id > broken, outcomes
    assert await _read_all(ml) == written + [b"c"]


async def test_interval_policy_a_failed_periodic_fdatasync_is_logged_in_one_line(factories, monkeypatch, wait_until,
                                                                               caplog):
    """A failing disk fails every periodic sync of every ledger written: the
    chaos runs with ``--sync-policy interval --faults fsync-error`` logged
    a two-part traceback for each (40 in 60 s). The error is expected of a
    failing disk: one line naming the ledger and the error."""
    disk = FailingDisk(monkeypatch, fsync_too=False)
    factory = factories(sync_policy="interval", sync_interval_ms=5)
    ml = await factory.open("t")
    await ml.append(b"a")
    broken = ml.ledgers[-1].ledger_id
    disk.failing = True
    with caplog.at_level("ERROR", logger="magnetar.storage.file.group_commit"):
        try:
            await ml.append(b"b")
        except StorageError:
            pass  # the syncer met "a" first: fenced already, which is what this test looks at
        await wait_until(lambda: ml._appends.current.state.value == "fenced", what="the ledger fenced by the syncer")
    disk.failing = False
    records = [r for r in caplog.records if "periodic fsync" in r.getMessage()]
    assert records, caplog.text
    assert all(r.exc_info is None for r in records), caplog.text
    assert f"periodic fsync of ledger {broken} failed; fencing it" in records[0].getMessage()
    assert "Input/output error" in records[0].getMessage()
