"""Opening a managed ledger: recovering what a crash or a previous owner left.

A ledger left open is fenced first (``LedgerBackend.fence``: a previous
owner still running acknowledges nothing more), recovered (for segment
files: scanned, its torn tail cut) and sealed at its last intact entry; then a new ledger is created for writes
and the metadata record is written with compare-and-set, which fences the
previous owner's metadata writes. A mixin of
:class:`~.managed_ledger.ManagedLedger`.
"""
from __future__ import annotations

import json
import logging
import time

from .position import Position

from .ledger_meta import _LedgerMeta

log = logging.getLogger(__name__)


class Recovery:
    """Open-time recovery (mixin; state lives on the ledger)."""

    # ================================================================== open

    async def _recover(self) -> None:
        """Load metadata, recover an unsealed ledger, start a new one."""
        record = await self._store.get(self._key)
        metas: list[_LedgerMeta] = []
        if record is not None:
            doc = json.loads(record.value)
            metas = [_LedgerMeta.from_doc(d) for d in doc.get("ledgers", [])]
            self._properties = dict(doc.get("properties", {}))
            self._meta_version = record.version
        empties = []
        for meta in metas:
            if meta.state == "closed":
                continue
            # Fence first: a previous owner still running must not acknowledge
            # anything it writes to this ledger from now on.
            await self._backend.fence(meta.ledger_id)
            ledger = await self._backend.recover(meta.ledger_id)
            if ledger is None:
                # created in metadata but never stored: nothing was written to it
                log.warning("%s: ledger %d has no data; dropping it", self.name, meta.ledger_id)
                meta.entries = 0
                empties.append(meta)
                continue
            meta.entries, meta.size = ledger.entry_count, ledger.size
            meta.state = "closed"
            meta.closed = time.time()
            log.info("%s: recovered ledger %d with %d entries", self.name, meta.ledger_id, meta.entries)
            if meta.entries:
                meta.ledger = ledger
            else:
                ledger.close()
                empties.append(meta)
        for meta in metas:
            if meta.state == "closed" and not meta.entries and meta not in empties:
                empties.append(meta)
        metas = [m for m in metas if m not in empties]
        new_id = await self._factory._new_ledger_id()
        new_ledger = await self._backend.create(new_id)
        new_meta = _LedgerMeta(new_id, created=time.time())
        try:
            async with self._meta_lock:
                await self._save([m.doc() for m in metas] + [new_meta.doc()], self._properties)
        except BaseException:
            await self._backend.delete(new_id, new_ledger)
            for meta in metas:
                if meta.ledger is not None:
                    meta.ledger.close()
            raise
        for meta in empties:
            await self._backend.delete(meta.ledger_id)
        for meta in metas:
            self._ledgers[meta.ledger_id] = meta
            self._ids.append(meta.ledger_id)
            if meta.entries:
                self._last_confirmed = Position(meta.ledger_id, meta.entries - 1)
        self._install(new_meta, new_ledger)
        await self._load_cursors()
        self._watch = self._store.watch(self._key, self._on_metadata_change)
        self._schedule_trim()
