"""MetadataStore.transaction: compares, puts and deletes as one atomic step,
run against every backend (memory, sqlite, a real etcd, routed)."""
from __future__ import annotations

import pytest

from magnetar.metadata import BadVersion, Compare, Delete, EventType, Put, Record, TransactionFailed
from magnetar.metadata.store import MAX_TRANSACTION_BYTES, MAX_TRANSACTION_OPS


async def test_all_compares_hold_then_every_write_applies(store):
    await store.put("/t/a", b"a0", -1)
    await store.put("/t/gone", b"x", -1)
    versions = await store.transaction(
        [Compare("/t/a", 0), Compare("/t/new", -1)],
        [Put("/t/a", b"a1"), Put("/t/new", b"n0"), Delete("/t/gone"), Delete("/t/never")])
    assert versions == [1, 0, None, None]
    assert await store.get("/t/a") == Record("/t/a", b"a1", 1, False)
    assert await store.get("/t/new") == Record("/t/new", b"n0", 0, False)
    assert await store.get("/t/gone") is None


async def test_one_failed_compare_writes_nothing_and_names_every_failing_key(store):
    await store.put("/t/a", b"a0", -1)
    await store.put("/t/b", b"b0", -1)
    await store.put("/t/b", b"b1", 0)  # b moved on: a takeover bumped its version
    with pytest.raises(TransactionFailed) as caught:
        await store.transaction(
            [Compare("/t/a", 0), Compare("/t/b", 0), Compare("/t/c", 0), Compare("/t/a", 0)],
            [Put("/t/a", b"zombie"), Put("/t/entries", b"e"), Delete("/t/b")])
    assert caught.value.keys == ["/t/b", "/t/c"]
    assert isinstance(caught.value, BadVersion)
    assert await store.get("/t/a") == Record("/t/a", b"a0", 0, False)
    assert await store.get("/t/b") == Record("/t/b", b"b1", 1, False)
    assert await store.get("/t/entries") is None


async def test_a_key_that_must_not_exist(store):
    await store.transaction([Compare("/t/x", -1)], [Put("/t/x", b"1")])
    with pytest.raises(TransactionFailed):
        await store.transaction([Compare("/t/x", -1)], [Put("/t/x", b"2")])
    assert (await store.get("/t/x")).value == b"1"


async def test_watchers_hear_every_write(store, recorder):
    rec = recorder()
    watch = store.watch("/w", rec)
    await store.put("/w/old", b"o", -1)
    assert (await rec.next()).key == "/w/old"
    await store.transaction([], [Put("/w/one", b"1"), Delete("/w/old")])
    notes = {(n.type, n.key) for n in (await rec.next(), await rec.next())}
    assert notes == {(EventType.CREATED, "/w/one"), (EventType.DELETED, "/w/old")}
    watch.cancel()


async def test_limits_and_bad_input_are_one_clear_error(store):
    with pytest.raises(ValueError, match="at most"):
        await store.transaction([Compare(f"/t/{i}", -1) for i in range(MAX_TRANSACTION_OPS + 1)], [])
    with pytest.raises(ValueError, match="twice"):
        await store.transaction([], [Put("/t/a", b"1"), Delete("/t/a")])
    with pytest.raises(ValueError, match="bytes limit"):
        await store.transaction([], [Put("/t/big", b"x" * (MAX_TRANSACTION_BYTES + 1))])
    with pytest.raises(ValueError):
        await store.transaction([Compare("relative", 0)], [])
    with pytest.raises(TypeError):
        await store.transaction([], [("/t/a", b"1")])
    assert await store.children("/t") == []


async def test_as_many_writes_as_allowed(store):
    writes = [Put(f"/t/{i:03d}", b"v") for i in range(MAX_TRANSACTION_OPS)]
    versions = await store.transaction([Compare("/t/fence", -1)], writes)
    assert versions == [0] * MAX_TRANSACTION_OPS
    assert len(await store.children("/t")) == MAX_TRANSACTION_OPS


async def test_without_versions_a_full_transaction_applies_and_a_failed_compare_names_its_key(store):
    # The object backend's commit: a compare and a put per ledger, up to the
    # cap of both; on etcd this is one Txn only without the put read-backs.
    for i in range(MAX_TRANSACTION_OPS):
        await store.put(f"/l/{i:03d}", b"open", -1)
    compares = [Compare(f"/l/{i:03d}", 0) for i in range(MAX_TRANSACTION_OPS)]
    writes = [Put(f"/l/{i:03d}/s/0", b"section") for i in range(MAX_TRANSACTION_OPS)]
    assert await store.transaction(compares, writes, versions=False) == [None] * MAX_TRANSACTION_OPS
    assert (await store.get("/l/127/s/0")).value == b"section"
    await store.put("/l/005", b"fenced", 0)
    with pytest.raises(TransactionFailed) as caught:
        await store.transaction(compares, [Put(f"/l/{i:03d}/s/1", b"s") for i in range(MAX_TRANSACTION_OPS)],
                                versions=False)
    assert caught.value.keys == ["/l/005"]
    assert await store.get("/l/000/s/1") is None
