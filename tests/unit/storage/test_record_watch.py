"""A managed ledger's record watch acts on others' writes, not its own.

Each managed ledger watches its record so that a takeover elsewhere stops
its writes at once; a check costs a read of the record. Its own writes
(two per rollover) come back on the same watch, some before the write's
answer (etcd): recognised by the version they name, they cost no read.
Over the in-memory store and a real etcd.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.errors import ManagedLedgerFencedError
from magnetar.storage.ledger_record import ManagedLedgerRecord


async def _until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_rollovers_read_no_record_back_and_a_takeover_still_fences(memory_or_etcd_store, tmp_path,
                                                                         monkeypatch):
    store = memory_or_etcd_store
    reads = []
    real = ManagedLedgerRecord.changed_elsewhere

    async def counted(self):
        reads.append(self.key)
        return await real(self)

    monkeypatch.setattr(ManagedLedgerRecord, "changed_elsewhere", counted)
    heard = []
    real_heard = ManagedLedgerRecord.heard_unknown_change
    monkeypatch.setattr(ManagedLedgerRecord, "heard_unknown_change", lambda self: heard.append(1) or real_heard(self))
    factory = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always", max_entries_per_ledger=2))
    ml = await factory.open("t/ns/persistent/watched")
    for i in range(12):
        await ml.append(b"e%d" % i)
    await _until(lambda: len(ml.ledgers) >= 5)  # rollovers: two record writes each, their echoes on the watch
    # The last rollover and the next ledger's preparation write the record in the background: wait until
    # both are over, or "another owner's write" below races our own and loses its compare-and-set.
    await _until(lambda: ml._appends._rollover_task is None and ml._roller._prepare_task is None)
    # Another key's write after ours: once its notification is here, ours were delivered too.
    seen = []
    store.watch("/marker", lambda note: seen.append(note))
    await store.put("/marker", b"")
    await _until(lambda: seen)
    await _until(lambda: ml._owner_check is None)
    assert reads == []  # without the versions, each echo was a check and a read

    current = await store.get(ml._record.key)
    await store.put(ml._record.key, current.value, current.version)  # another owner's write
    await _until(lambda: reads and ml._owner_check is None)  # that one is read, and the check is over
    with pytest.raises(ManagedLedgerFencedError):
        await ml.append(b"late")
    await factory.close()
