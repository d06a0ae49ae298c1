"""Which managed ledgers are stored under a name prefix, read from metadata
without opening any of them.

Managed ledger records live at ``/managed-ledgers/<name>`` and their names
nest (``tenant/ns/persistent/topic``, a compacted view below its topic), so
a namespace's topics are the children of one key: one range read of the
store, whatever the number of topics elsewhere. These functions never load
a managed ledger. MetadataError passes through.
"""
from __future__ import annotations

import json

from ..metadata.store import MetadataStore
from .ledger_meta import ROOT, check_name


async def child_names(store: MetadataStore, parent: str) -> list[str]:
    """The names right below ``parent`` (``tenant/ns/persistent`` -> its
    topics' local names), sorted. One read of the store's keys, no record
    read: a name with only leftovers below it would be listed too, which
    deleting a managed ledger does not leave."""
    check_name(parent)
    return await store.children(f"{ROOT}/{parent}")


async def names_below(store: MetadataStore, parent: str) -> list[str]:
    """Every managed ledger stored at any depth below ``parent`` (its full
    name), sorted; reads the records of that subtree only."""
    check_name(parent)
    names: list[str] = []

    async def walk(key: str, prefix: str, in_ledger: bool) -> None:
        for child in await store.children(key):
            if in_ledger and child == "cursors":
                continue  # a managed ledger's cursors, never a managed ledger
            path = f"{key}/{child}"
            record = await store.get(path)
            is_ml = record is not None and _is_ml_record(record.value)
            if is_ml:
                names.append(prefix + child)
            await walk(path, f"{prefix}{child}/", is_ml)

    parent_record = await store.get(f"{ROOT}/{parent}")
    await walk(f"{ROOT}/{parent}", f"{parent}/", parent_record is not None and _is_ml_record(parent_record.value))
    return sorted(names)


def _is_ml_record(value: bytes) -> bool:
    try:
        doc = json.loads(value)
    except ValueError:
        return False
    return isinstance(doc, dict) and "ledgers" in doc
