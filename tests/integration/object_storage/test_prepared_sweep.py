"""Ledgers created ahead of a rollover and never recorded are deleted by the
next owner's recovery (issue 41; docs/ARCHITECTURE.md "Rolling over without
holding appends"). Real etcd, real SeaweedFS, the storage layer alone.

- A crash while switched (appends committed into the prepared ledger, the
  record not written yet): the next owner's recovery deletes the prepared
  ledger's record and its section records (format 2: its record, which
  alone finds its sections in the commit records); everything acknowledged reads
  back; another managed ledger's prepared ledger (live, the same broker) is
  left alone; the sweep is counted. Deleting the managed ledger instead
  of opening it deletes the prepared ledger too.
- A slow zombie owner while switched: the new owner deletes the prepared
  ledger while the zombie still commits into it; the zombie hands out no
  receipt, the new owner reads exactly what was acknowledged.
"""
from __future__ import annotations

import asyncio

from magnetar.metadata import EtcdMetadataStore
from magnetar.storage import StorageError
from magnetar.storage.object import object_ledger
from magnetar.storage.object.commit_records import read_records
from magnetar.storage.object.index import ledger_key, ledger_layout
from tests.helpers import wait_until

from .test_rollover_switch import _at_a_blocked_rollover, latency_factory


async def _keys_of(store, ledger_id: int) -> list[str]:
    """The ledger's record (``""``) and its index records' names (layout
    format 2: ``r/<first>`` for each of its sections in its writer's commit
    records, found through its record)."""
    key = ledger_key(ledger_id)
    record = await store.get(key)
    found = [] if record is None else [""]
    for kind in ("s", "c"):
        found += [f"{kind}/{n}" for n in await store.children(f"{key}/{kind}")]
    layout, doc = ledger_layout(record.value) if record is not None else (1, {})
    if layout == 2:
        sections = await read_records(store, doc["writer"], doc["from"], {ledger_id})
        found += [f"r/{s.first}" for s in sections.get(ledger_id, [])]
    return found


async def _prepared_ledger(ml) -> int:
    """Append until ``ml`` has created its next ledger ahead; its id."""
    while ml._roller.prepared is None:
        await ml.append(b"x")
        assert ml._appends.current.entry_count < 6, "nothing prepared"
    return ml._roller.prepared.meta.ledger_id


async def test_a_crash_while_switched_leaves_no_prepared_ledger_after_recovery(
        tmp_path, etcd_server, prefix, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)  # prepared at 3 sections, full at 6
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    crashed_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    crashed = latency_factory(tmp_path, crashed_store, objects_url)
    ml = await crashed.open("t/crashed")
    release, acked, pending, _ = await _at_a_blocked_rollover(ml)
    switched_to = ml._appends.current
    pending += [(b"late", ml.append(b"late"))]
    await wait_until(lambda: switched_to.entry_count == len(pending), what="the prepared ledger's commits")
    assert len(await _keys_of(store, switched_to.ledger_id)) >= 2  # its record and section records
    crashed.abandon()  # kill -9 between the switch and the record naming the ledger
    await crashed_store.close()

    owner_factory = latency_factory(tmp_path / "new", store, objects_url)
    live = await owner_factory.open("t/live")
    live_prepared = await _prepared_ledger(live)  # created ahead, not recorded: live, must stay
    owner = await owner_factory.open("t/crashed")
    assert await _keys_of(store, switched_to.ledger_id) == []
    assert owner_factory.prepared_ledgers_swept == 1
    entries = await owner.read_entries(owner.first_position(), 1000)
    assert [e.position for e in entries] == acked  # everything acknowledged, nothing else
    assert await store.get(ledger_key(live_prepared)) is not None
    assert await store.get(ledger_key(owner._appends.current_meta.ledger_id)) is not None
    await owner.append(b"mine")
    await live.append(b"still")
    # Opened again (the record no longer names it as prepared): nothing more to sweep.
    await owner.close()
    again = await owner_factory.open("t/crashed")
    assert again.swept_at_open == [] and owner_factory.prepared_ledgers_swept == 1
    assert [e.data for e in await again.read_entries(again.first_position(), 1000)][-1] == b"mine"
    await owner_factory.close()
    await store.close()


async def test_deleting_a_managed_ledger_a_crash_left_switched_deletes_its_prepared_ledger(
        tmp_path, etcd_server, prefix, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    crashed_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    crashed = latency_factory(tmp_path, crashed_store, objects_url)
    ml = await crashed.open("t/deleted")
    _, acked, _, old = await _at_a_blocked_rollover(ml)
    switched_to = ml._appends.current
    crashed.abandon()
    await crashed_store.close()
    factory = latency_factory(tmp_path / "new", store, objects_url)
    await factory.delete("t/deleted")  # never opened again: no recovery swept it
    assert await _keys_of(store, switched_to.ledger_id) == []
    assert await _keys_of(store, old.ledger_id) == []
    await factory.close()
    await store.close()


async def test_a_zombie_switched_to_a_prepared_ledger_the_new_owner_deleted_gives_no_receipt(
        tmp_path, etcd_server, prefix, objects_url, monkeypatch):
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 6)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)  # every ledger at the maximum
    old_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    new_store = await EtcdMetadataStore.open(etcd_server.store_url(prefix))
    old = latency_factory(tmp_path, old_store, objects_url)
    zombie = await old.open("t/zombie")
    zombie._record.stop_watching()  # it does not hear of the new owner
    release, acked, pending, _ = await _at_a_blocked_rollover(zombie)
    switched_to = zombie._appends.current
    late = [f for _, f in pending]
    await wait_until(lambda: switched_to.entry_count == len(late), what="the zombie's prepared ledger committed")
    new_factory = latency_factory(tmp_path / "new", new_store, objects_url)
    owner = await new_factory.open("t/zombie")
    assert await _keys_of(new_store, switched_to.ledger_id) == []  # swept while the zombie runs
    late += [zombie.append(b"late-%d" % i) for i in range(3)]  # its commits into the deleted ledger fail
    release.set()  # its record write fails the compare-and-set too
    results = await asyncio.gather(*late, return_exceptions=True)
    assert all(isinstance(r, StorageError) for r in results), results
    entries = await owner.read_entries(owner.first_position(), 1000)
    assert [e.position for e in entries] == acked
    assert await _keys_of(new_store, switched_to.ledger_id) == []
    await owner.append(b"mine")
    old.abandon()
    await new_factory.close()
    await old_store.close()
    await new_store.close()
