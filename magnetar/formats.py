"""Versions of the formats Magnetar keeps data in, and the check every reader makes.

Each kind of stored data says which format it is in (docs/operations.md,
"Data formats"); a record written before it carried one is format 1. A
reader that meets a format newer than it knows raises
:class:`NewerFormatError` before it writes anything, and a broker that gets
it while starting stops with its message as one line: a newer Magnetar wrote
that data, and only it (or a later one) may touch it.
"""
from __future__ import annotations

import json

from magnetar.metadata.store import BadVersion, MetadataStore

#: The data set's record in the metadata store: the format of each kind of
#: data it holds. Written by the first broker that starts on a store without
#: one (a data set from before the record existed is format 1 throughout).
PATH = "/admin/data-format"

#: The formats this code reads and writes, by kind of data.
KINDS = {
    "segment_files": 1,          # <ledger>.log records and the MGLX .idx (its own version field too)
    "journal": 1,                # journal/<process>/<seq>.jnl files (MGJL head with the format)
    "object_layout": 3,          # commit objects, chunks and their index records (/object-ledgers; 2: /object-commits;
                                 # 3: ledger index objects, ledgers/<id>/index)
    "managed_ledgers": 1,        # /managed-ledgers/<name> records ("format")
    "cursors": 1,                # cursor records ("format")
    "dedup_snapshots": 1,        # producer sequence snapshots ("format")
    "schemas": 1,                # schema records ("format")
    "namespace_policies": 1,     # clusters, tenants, policies (no field while format 1)
    "dynamic_configuration": 1,  # /admin/configuration ("format")
}

#: What a new data set's record says: the formats written before any data
#: needs more. A kind goes up (:func:`raise_format`) when data of its newer
#: format is first written, so older brokers refuse the data set from then on.
FIRST_WRITTEN = dict(KINDS, object_layout=1)


class NewerFormatError(Exception):
    """Data in a format newer than this code knows; the message is one line."""


def check_format(what: str, where: str, found: object, known: int) -> int:
    """``found`` (the format a record says it is in) if this code reads it;
    NewerFormatError if it is newer than ``known`` or not a format number."""
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise NewerFormatError(f"{what} at {where} says format {found!r}, which this Magnetar does not know "
                               f"(it reads formats 1 to {known}): nothing was changed")
    if found > known:
        raise NewerFormatError(f"{what} at {where} is in format {found}, newer than this Magnetar reads "
                               f"(up to {known}): a newer Magnetar wrote it; upgrade this broker. "
                               f"Nothing was changed")
    return found


async def check_data_set(store: MetadataStore) -> dict[str, int]:
    """Check (and, on a store without one, write) the data set's format record;
    the formats it names. NewerFormatError, before anything is written, if any
    kind is newer than this code reads or is a kind it does not know."""
    for _ in range(5):
        record = await store.get(PATH)
        if record is None:
            doc = {"format": 1, "kinds": FIRST_WRITTEN}
            try:
                await store.put(PATH, json.dumps(doc, sort_keys=True).encode(), -1)
            except BadVersion:
                continue  # another broker wrote it first: check that one
            return dict(FIRST_WRITTEN)
        try:
            doc = json.loads(record.value)
            kinds = doc["kinds"]
            if not isinstance(kinds, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise NewerFormatError(f"the data set's format record at {PATH} is unreadable: it was not written by "
                                   f"this Magnetar; nothing was changed") from None
        check_format("the data set's format record", PATH, doc.get("format", 1), 1)
        for kind, found in sorted(kinds.items()):
            if kind not in KINDS:
                raise NewerFormatError(f"the data set holds {kind} (format {found}), which this Magnetar does not "
                                       f"know: a newer Magnetar wrote it; upgrade this broker. Nothing was changed")
            check_format(kind.replace("_", " "), PATH, found, KINDS[kind])
        return {k: int(v) for k, v in kinds.items()}
    raise NewerFormatError(f"the data set's format record at {PATH} keeps changing: try again")


async def raise_format(store: MetadataStore, kind: str, to: int) -> None:
    """Say in the data set's record that ``kind`` is now written in format
    ``to`` (before the first such data is written): a broker that reads only
    older ones refuses the data set at its next start (one line). No change
    if it says that or more already. MetadataError from the store."""
    if to > KINDS[kind]:
        raise ValueError(f"{kind} format {to} is newer than this Magnetar writes")
    while True:
        record = await store.get(PATH)
        if record is None:
            doc = {"format": 1, "kinds": dict(FIRST_WRITTEN)}
            version = -1
        else:
            doc = json.loads(record.value)
            version = record.version
        if int(doc["kinds"].get(kind, 1)) >= to:
            return
        doc["kinds"][kind] = to
        try:
            await store.put(PATH, json.dumps(doc, sort_keys=True).encode(), version)
            return
        except BadVersion:
            continue
