"""Opening a managed ledger: recovering what a crash or a previous owner left.

A ledger left open is fenced first (``LedgerBackend.fence``: a previous
owner still running acknowledges nothing more), recovered (for segment
files: scanned, its torn tail cut) and sealed at its last intact entry;
ledgers left empty are dropped. Then a new ledger is created for writes and
the record is written with compare-and-set, which fences the previous
owner's metadata writes.

Entries that were written but never confirmed may survive a crash and
become readable. Ledger files that no managed ledger names (a crash between
creating a file and recording it, or between un-recording a trimmed ledger
and unlinking it) are deleted by
``ManagedLedgerFactory.remove_orphaned_ledgers``, which the broker runs at
start-up before any topic loads.

Failure modes: what the backend and the record raise (``StorageError``,
``ManagedLedgerFencedError``, ``MetadataError``); the new ledger is deleted
and the recovered ones closed before the error goes up, nothing else
changed.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

from .backend import LedgerBackend, LedgerHandle
from .ledger_meta import LedgerMeta
from .ledger_record import ManagedLedgerRecord

log = logging.getLogger(__name__)


@dataclass
class Recovered:
    """What :func:`recover` found and made."""

    #: The sealed ledgers that hold entries, oldest first (their handles open
    #: where recovery opened them).
    ledgers: list[LedgerMeta]
    properties: dict[str, str]
    #: The new ledger for writes, recorded, and its handle.
    current: LedgerMeta
    current_handle: LedgerHandle


async def recover(record: ManagedLedgerRecord, backend: LedgerBackend,
                  new_ledger_id: Callable[[], Awaitable[int]]) -> Recovered:
    """Load the record, fence and seal every ledger left open, drop empty
    ones, and record a new ledger for writes (see the module docstring)."""
    name = record.name
    metas, properties = await record.load()
    empties = []
    fenced: set[int] = set()  # ledgers this recovery fenced: dropped, their fence stays
    for meta in metas:
        if meta.state == "closed":
            continue
        fenced.add(meta.ledger_id)
        # Fence first: a previous owner still running must not acknowledge
        # anything it writes to this ledger from now on.
        await backend.fence(meta.ledger_id)
        ledger = await backend.recover(meta.ledger_id)
        if ledger is None:
            # created in metadata but never stored: nothing was written to it
            log.warning("%s: ledger %d has no data; dropping it", name, meta.ledger_id)
            meta.entries = 0
            empties.append(meta)
            continue
        meta.entries, meta.size = ledger.entry_count, ledger.size
        meta.state = "closed"
        meta.closed = time.time()
        log.info("%s: recovered ledger %d with %d entries", name, meta.ledger_id, meta.entries)
        if meta.entries:
            meta.ledger = ledger
        else:
            ledger.close()
            empties.append(meta)
    for meta in metas:
        if meta.state == "closed" and not meta.entries and meta not in empties:
            empties.append(meta)
    metas = [m for m in metas if m not in empties]
    new_id = await new_ledger_id()
    new_ledger = await backend.create(new_id)
    new_meta = LedgerMeta(new_id, created=time.time())
    try:
        async with record.lock:
            await record.save([m.doc() for m in metas] + [new_meta.doc()], properties)
    except BaseException:
        await backend.delete(new_id, new_ledger)
        for meta in metas:
            if meta.ledger is not None:
                meta.ledger.close()
        raise
    for meta in empties:
        await backend.delete(meta.ledger_id, fenced=meta.ledger_id in fenced)
    return Recovered(metas, properties, new_meta, new_ledger)
