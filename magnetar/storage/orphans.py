"""Sweeping orphaned ledger files while the broker already serves.

A crash between creating a ledger file and recording it, or between dropping
a trimmed ledger from metadata and unlinking its files, leaves files that no
managed ledger names. Finding them reads every managed ledger's metadata:
with 100,000 topics that is 100,000 reads, too slow to do before serving.

So the sweep is split in two. :func:`mark` runs at start-up, before any
managed ledger is opened, and takes one number from the ledger id counter:
every ledger id below it was allocated by an earlier run (ids come in
blocks, :mod:`.ledger_ids`, and this run's factory reserves its first after
the mark, so every id it hands out is above it). :func:`sweep` runs
later, beside open managed ledgers, and considers only files below the mark.
That is safe because no managed ledger ever starts naming a ledger it did not
name at start-up, except new ones (ids above the mark); a file below the mark
that metadata does not name when the sweep reads it is either an orphan or a
ledger being trimmed, whose files go anyway. Standalone brokers only: in a
cluster other brokers' ledgers share the directory and the counter.
"""
from __future__ import annotations

import asyncio
import json
import logging

from ..metadata.store import MetadataError, MetadataStore
from .errors import StorageError
from .backend import LedgerBackend
from .ledger_meta import LEDGER_ID_COUNTER, ROOT

log = logging.getLogger(__name__)

#: Metadata reads between two yields to the event loop (the sweep runs beside traffic).
READS_PER_YIELD = 64


async def mark(store: MetadataStore) -> int:
    """The lowest ledger id this run can allocate: ids below it are earlier
    runs'. Costs one counter increment (one id never used). Raises
    StorageError when the store cannot be reached."""
    try:
        return await store.increment(LEDGER_ID_COUNTER)
    except MetadataError as exc:
        raise StorageError(f"cannot read the ledger id counter: {exc}") from exc


async def sweep(store: MetadataStore, backend: LedgerBackend, below: int) -> list[int]:
    """Delete the ledgers ``backend`` stores with an id below ``below`` that
    no managed ledger names; return their ids. Leaves everything when the store names
    no managed ledger at all while files exist (a data directory paired with
    the wrong or a lost metadata store). Raises StorageError if the metadata
    cannot be read (nothing is deleted then)."""
    on_disk = {i for i in await backend.stored_ledger_ids() if i < below}
    if not on_disk:
        return []
    referenced: set[int] = set()
    found_any = False
    reads = 0

    async def walk(key: str, in_ledger: bool) -> None:
        nonlocal found_any, reads
        for child in await store.children(key):
            if in_ledger and child == "cursors":
                continue  # a managed ledger's cursors name no ledger
            path = f"{key}/{child}"
            record = await store.get(path)
            reads += 1
            if reads % READS_PER_YIELD == 0:
                await asyncio.sleep(0)
            ids = None if record is None else _ledger_ids(record.value)
            if ids is not None:
                found_any = True
                referenced.update(ids)
            await walk(path, ids is not None)

    try:
        await walk(ROOT, False)
    except MetadataError as exc:
        raise StorageError(f"cannot list managed ledgers to find orphaned ledgers: {exc}") from exc
    if not found_any:
        log.warning("%d stored ledgers but no managed ledger in the metadata store: leaving them", len(on_disk))
        return []
    orphans = sorted(on_disk - referenced)
    for ledger_id in orphans:
        log.warning("deleting orphaned ledger %d (no managed ledger names it)", ledger_id)
        await backend.delete(ledger_id)
    return orphans


async def sweep_later(store: MetadataStore, backend: LedgerBackend, below: int, delay_s: float) -> None:
    """:func:`sweep` after ``delay_s`` (a task of the broker's); a failure is
    logged, never raised: the orphans wait for the next start."""
    await asyncio.sleep(delay_s)
    try:
        orphans = await sweep(store, backend, below)
    except StorageError as exc:
        log.warning("orphaned ledger sweep skipped: %s", exc)
        return
    log.info("orphaned ledger sweep done: %d deleted", len(orphans))


def _ledger_ids(value: bytes) -> list[int] | None:
    """The ledger ids a managed ledger's record names; None if it is not one."""
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "ledgers" not in doc:
        return None
    return [int(d["id"]) for d in doc["ledgers"]]
