"""Two brokers sealing the same ledger at once: an owner closing a topic it
just lost (its session lapsed) and the new owner recovering that ledger.

Found by ``magnetar-chaos run --topology cluster --faults move,kill,pause
--interval 0.5,1.5 --seed 3``: both wrote the index through one shared
temporary name, so one's rename found the file gone ("sealing ledger 32
failed: No such file or directory: ...idx.tmp"), and meanwhile the other
could rename a file the first was still writing.
"""
from __future__ import annotations

import logging
import threading

from magnetar.metadata import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.file.ledger import Ledger, _load_index, index_path, log_path, write_fence


def test_two_sealers_of_one_ledger_both_succeed_and_leave_a_valid_index(tmp_path):
    failures = []
    for ledger_id in range(1, 151):
        writer = Ledger.create(tmp_path, ledger_id)
        writer.write_entries([b"x" * (ledger_id % 7 + 1)] * 50)
        writer.sync()
        write_fence(tmp_path, ledger_id)
        recovered = Ledger.recover(tmp_path, ledger_id)
        start = threading.Barrier(2)

        def seal(ledger: Ledger) -> None:
            start.wait()
            try:
                ledger.seal()
            except Exception as exc:  # noqa: BLE001  (collected for the assertion)
                failures.append(exc)

        threads = [threading.Thread(target=seal, args=(lg,)) for lg in (writer, recovered)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        size = log_path(tmp_path, ledger_id).stat().st_size
        assert _load_index(index_path(tmp_path, ledger_id), size) is not None, ledger_id
        writer.close()
        recovered.close()
    assert not failures, failures[:3]
    assert not list(tmp_path.rglob("*.tmp")), "no temporary index left behind"


async def test_an_owner_closing_a_ledger_the_new_owner_fenced_leaves_the_seal_to_it(tmp_path, caplog):
    store = await MemoryMetadataStore.open()
    old = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    new = ManagedLedgerFactory(tmp_path, store, StorageConfig(sync_policy="always"))
    lost = await old.open("t/ns/persistent/x")
    acked = [await lost.append(b"a%d" % i) for i in range(3)]
    lost._record.stop_watching()  # its session lapsed: it hears of the takeover late
    owner = await new.open("t/ns/persistent/x")
    with caplog.at_level(logging.INFO, logger="magnetar.storage"):
        await lost.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    stored = await owner.read_entries(owner.first_position(), 100)
    assert [e.position for e in stored][:3] == acked
    await new.close()
    await old.close()
    await store.close()
