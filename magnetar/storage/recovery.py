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
start-up before any topic loads. Ledgers the previous owner created ahead
of a rollover (the record names them under ``prepared``, not among its
ledgers) are deleted once this recovery's record write has fenced that
owner's metadata writes (:func:`sweep_prepared`).

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
from .errors import StorageError
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
    #: Ledgers a previous owner prepared and never recorded, deleted now.
    swept: list[int]


async def recover(record: ManagedLedgerRecord, backend: LedgerBackend,
                  new_ledger_id: Callable[[int], Awaitable[int]],
                  creating: Callable[[], Awaitable[None]] | None = None) -> Recovered:
    """Load the record, fence and seal every ledger left open, drop empty
    ones, and record a new ledger for writes (see the module docstring).
    ``creating``: awaited when no record is stored, before anything is
    made; what it raises goes up, nothing made (the caller's check that the
    managed ledger may be created, without a read of the record of its own)."""
    name = record.name
    metas, properties = await record.load()
    if creating is not None and record.version == -1:
        await creating()
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
    named = {m.ledger_id for m in metas} | {m.ledger_id for m in empties}
    # Still named as prepared by the record written below, until deleted.
    record.prepared.extend(i for i in record.found_prepared if i not in named and i not in record.prepared)
    # Greater than every id it names, or ever named (cursors may name an
    # empty ledger dropped at close): positions are ordered by ledger id,
    # across owners too.
    above = max([m.ledger_id for m in metas + empties] + list(record.found_prepared) + list(record.prepared)
                + [record.highest_id])
    new_id = await new_ledger_id(above)
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
    swept = await sweep_prepared(name, record, backend)
    return Recovered(metas, properties, new_meta, new_ledger, swept)


async def sweep_prepared(name: str, record: ManagedLedgerRecord, backend: LedgerBackend) -> list[int]:
    """Delete the ledgers ``record.prepared`` names (created ahead by a
    previous owner, never among the record's ledgers); return their ids.

    Called only after this owner wrote the record: a previous owner, even
    one still running (a zombie), can then never name them (its next record
    write fails the compare-and-set), and no other managed ledger ever did
    (ids are unique, the ledger was created for this one). Each is fenced
    before it is deleted, so a zombie's commits into it fail from then on
    (no section record lands after the delete read them). A ledger that
    cannot be deleted stays named as prepared (the record's next write
    keeps it) and is logged: a later recovery tries again."""
    swept = []
    for ledger_id in list(record.prepared):
        try:
            await backend.fence(ledger_id)
            await backend.delete(ledger_id, fenced=True)
        except StorageError as exc:
            log.warning("%s: could not delete ledger %d, prepared by a previous owner and never recorded "
                        "(a later recovery tries again): %s", name, ledger_id, exc)
            continue
        record.prepared.remove(ledger_id)
        swept.append(ledger_id)
        log.info("%s: deleted ledger %d, prepared by a previous owner and never recorded", name, ledger_id)
    return swept
