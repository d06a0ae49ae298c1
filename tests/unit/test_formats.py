"""Every stored record says its format (none: format 1); a newer one is refused before anything is written."""
from __future__ import annotations

import json

import pytest

from magnetar.broker.namespaces import resources
from magnetar.broker.topics.schemas import _versions
from magnetar.formats import FIRST_WRITTEN, KINDS, PATH, NewerFormatError, check_data_set, check_format, raise_format
from magnetar.metadata import MemoryMetadataStore
from magnetar.storage.ledger_record import ManagedLedgerRecord
from magnetar.storage.object.index import check_ledger_record, ledger_record


def test_the_check_names_the_record_and_what_to_do():
    assert check_format("cursor record", "/k", 1, 1) == 1
    with pytest.raises(NewerFormatError, match="cursor record at /k is in format 2, newer .* upgrade this broker"):
        check_format("cursor record", "/k", 2, 1)
    with pytest.raises(NewerFormatError, match="does not know"):
        check_format("cursor record", "/k", "two", 1)


async def test_the_data_set_record_is_written_once_and_a_newer_or_unknown_kind_is_refused():
    store = await MemoryMetadataStore.open()
    try:
        # A new data set says the formats written before any data needs more:
        # object layout 1 until the first format-2 ledger raises it.
        assert await check_data_set(store) == FIRST_WRITTEN and FIRST_WRITTEN["object_layout"] == 1
        version = (await store.get(PATH)).version
        assert await check_data_set(store) == FIRST_WRITTEN and (await store.get(PATH)).version == version  # not rewritten
        await raise_format(store, "object_layout", 2)
        assert await check_data_set(store) == dict(KINDS, object_layout=2)
        await raise_format(store, "object_layout", 3)  # the first ledger compacted into an index object
        assert await check_data_set(store) == KINDS
        version = (await store.get(PATH)).version
        await raise_format(store, "object_layout", 2)  # says so (or more) already: not rewritten
        assert (await store.get(PATH)).version == version
        with pytest.raises(ValueError, match="newer than this Magnetar writes"):
            await raise_format(store, "object_layout", 4)
        await store.put(PATH, json.dumps({"format": 1, "kinds": {**KINDS, "schemas": 3}}).encode())
        with pytest.raises(NewerFormatError, match="schemas at /admin/data-format is in format 3"):
            await check_data_set(store)
        await store.put(PATH, json.dumps({"format": 1, "kinds": {"tiered_segments": 1}}).encode())
        with pytest.raises(NewerFormatError, match="holds tiered_segments .* does not know"):
            await check_data_set(store)
    finally:
        await store.close()


async def test_records_without_a_format_are_format_1_and_newer_ones_are_refused():
    store = await MemoryMetadataStore.open()
    try:
        record = ManagedLedgerRecord(store, "t/a")
        await store.put(record.key, json.dumps({"ledgers": [], "properties": {"p": "1"}}).encode())
        assert await record.load() == ([], {"p": "1"})
        await record.save([], {"p": "2"})
        assert json.loads((await store.get(record.key)).value)["format"] == 1
        newer = json.dumps({"format": 2, "ledgers": [], "properties": {}}).encode()
        await store.put(record.key, newer)
        with pytest.raises(NewerFormatError, match="managed ledger record at /managed-ledgers/t/a is in format 2"):
            await ManagedLedgerRecord(store, "t/a").load()
        assert (await store.get(record.key)).value == newer

        await store.put("/admin/policies/public/default", json.dumps({"format": 2}).encode())
        with pytest.raises(NewerFormatError, match="metadata record at /admin/policies/public/default"):
            await resources.get_namespace(store, "public/default")
    finally:
        await store.close()


def test_schema_and_object_ledger_records():
    assert _versions("/schemas/x", json.dumps({"versions": [{"type": "JSON"}]}).encode()) == [{"type": "JSON"}]
    with pytest.raises(NewerFormatError, match="schema record at /schemas/x is in format 2"):
        _versions("/schemas/x", json.dumps({"format": 2, "versions": []}).encode())
    assert json.loads(ledger_record("open", "s"))["format"] == 1
    assert json.loads(ledger_record("open", "s", layout=2, since=1))["format"] == 2
    check_ledger_record("/object-ledgers/1", json.dumps({"state": "open", "writer": "s"}).encode())
    check_ledger_record("/object-ledgers/1", json.dumps({"format": 2, "state": "open", "writer": "s"}).encode())
    with pytest.raises(NewerFormatError, match="object-store ledger at /object-ledgers/1 is in format 3"):
        check_ledger_record("/object-ledgers/1", json.dumps({"format": 3, "state": "open"}).encode())
