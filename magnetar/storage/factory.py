"""The managed ledger factory: opens managed ledgers (one instance per name),
owns the storage backend (:class:`~.backend.LedgerBackend`; segment files
by default, :mod:`.file`; :mod:`.object` by choice),
allocates ledger ids (in blocks: :mod:`.ledger_ids`), lists, deletes, and
removes orphaned ledgers at a standalone broker's start-up.
"""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Awaitable, Callable

from ..metadata.store import BadVersion, MetadataError, MetadataStore, KeyNotFound
from .cache import CacheBudget
from .config import RetentionPolicy, StorageConfig
from .errors import (
    ManagedLedgerClosedError,
    ManagedLedgerFencedError,
    ManagedLedgerNotFoundError,
    StorageError,
)
from .backend import LedgerBackend
from .file import FileBackend
from .flush_pass import FlushPass
from .managed_ledger import ManagedLedger
from .ledger_ids import LedgerIds
from .ledger_meta import ROOT, check_name

log = logging.getLogger(__name__)

#: Managed ledgers closed at once by :meth:`ManagedLedgerFactory.close`.
CLOSE_CONCURRENCY = 64
#: Under a broker's data directory: the object backend's spill (its commit objects kept for compaction).
SPILL_DIR = "object-spill"
#: Under it too: its copies of commit objects, for the compaction of the ledgers it opens from the store.
COPIES_DIR = "object-copies"
#: How long an open waits for a close of the same managed ledger already under way.
CLOSING_WAIT_S = 5.0


class ManagedLedgerFactory:
    """Opens managed ledgers with metadata in ``store`` and entries in
    ``backend`` (default: segment files under ``data_dir``,
    :class:`~.file.FileBackend`), which it owns and closes.

    One factory per event loop and backend.
    """

    def __init__(self, data_dir: Path, store: MetadataStore, config: StorageConfig | None = None, *,
                 backend: LedgerBackend | None = None, cache_budget: CacheBudget | None = None,
                 ledger_ids: LedgerIds | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.store = store
        self.config = config or StorageConfig()
        self.backend: LedgerBackend = backend or FileBackend(self.data_dir, self.config)
        #: What the managed ledgers' tail caches hold together, at most.
        self.cache_budget = cache_budget or CacheBudget(self.config.cache_budget_bytes)
        #: Where new ledgers' ids come from: blocks of the store's counter, handed out here.
        self.ledger_ids = ledger_ids or LedgerIds(store)
        self._open: dict[str, ManagedLedger] = {}
        #: Every managed ledger's appends go to the backend together, once per loop pass.
        self._flushes: FlushPass | None = None
        #: Its ``_new_ledger_id`` and ``_forget``, bound once for every managed ledger it opens.
        self._hooks: tuple | None = None
        self._opening: dict[str, asyncio.Task] = {}
        self._closed = False
        #: Ledgers created ahead by a previous owner and deleted by a recovery here (``/metrics``).
        self.prepared_ledgers_swept = 0

    async def open(self, name: str, *, retention: RetentionPolicy | None = None,
                   creating: Callable[[], Awaitable[None]] | None = None) -> ManagedLedger:
        """Open (recovering if needed) or create the managed ledger ``name``.

        Opening a name that is already open returns the same instance while
        it is open; one that is closing is waited for, and one that was
        fenced (another owner took over) or failed is replaced: a new
        instance recovers from the record.
        ``retention`` becomes its retention override (``set_retention``; on a
        new instance before anything is trimmed).
        ``creating``: awaited when ``name`` is not stored, before it is
        created; what it raises goes up unchanged, nothing created (a
        topic's load checks there that it may be created: one read of the
        record, not :meth:`exists` and then the open's own). An open that
        joins one under way takes that one's ``creating``.
        Raises ``ValueError`` for a bad name, ``StorageError`` if recovery
        fails (``CorruptLedgerError`` if a ledger lost entries it had
        confirmed, ``ManagedLedgerFencedError`` if another instance changed
        its metadata meanwhile).
        """
        check_name(name)
        if self._closed:
            raise ManagedLedgerClosedError("factory is closed")
        ml = self._open.get(name)
        if ml is not None and ml.state == "closing":
            # Already under way: wait for it (bounded: a close stuck on an
            # unreachable store must not hold every later open), then open
            # afresh. Replacing it early is safe: the new instance fences it.
            try:
                await asyncio.wait_for(ml.close(), CLOSING_WAIT_S)  # only waits: the close under way goes on
            except Exception:  # noqa: BLE001 (its own caller hears of its failure)
                pass
            ml = self._open.get(name)
        if ml is not None and ml.state != "open":
            # Fenced: another instance (broker) opened it since, and this
            # one's view ends where that one took over; failed: its view may
            # end before entries it could not confirm. Neither may serve
            # again (a topic loaded on a fenced one answered offsets older
            # than receipts already given). A new instance recovers from the
            # record; the old one still closes and forgets itself.
            del self._open[name]
            ml = None
        if ml is None:
            task = self._opening.get(name)
            if task is None:
                task = asyncio.get_running_loop().create_task(self._open_new(name, retention, creating))
                self._opening[name] = task
                task.add_done_callback(lambda _: self._opening.pop(name, None))
            ml = await asyncio.shield(task)
        if ml.retention != retention:
            ml.set_retention(retention)
        return ml

    async def _open_new(self, name: str, retention: RetentionPolicy | None = None,
                        creating: Callable[[], Awaitable[None]] | None = None) -> ManagedLedger:
        if self._flushes is None:  # on the loop (one factory per loop)
            self._flushes = FlushPass(self.backend, asyncio.get_running_loop())
        if self._hooks is None:  # bound once: a bound method per managed ledger is one more object each
            self._hooks = (self._new_ledger_id, self._forget)
        new_ledger_id, forget = self._hooks
        ml = ManagedLedger(name, config=self.config, store=self.store, backend=self.backend,
                           cache_budget=self.cache_budget, new_ledger_id=new_ledger_id,
                           on_closed=forget, flushes=self._flushes)
        ml._trimmer.retention = retention
        refused: list[BaseException] = []  # what ``creating`` raised goes up as it is

        async def check() -> None:
            try:
                await creating()
            except BaseException as exc:
                refused.append(exc)
                raise

        try:
            await ml._recover(None if creating is None else check)
        except (MetadataError, OSError) as exc:
            if refused and refused[0] is exc:
                raise
            raise StorageError(f"opening managed ledger {name!r} failed: {exc}") from exc
        self.prepared_ledgers_swept += len(ml.swept_at_open)
        self._open[name] = ml
        return ml

    def _forget(self, ml: ManagedLedger) -> None:
        if self._open.get(ml.name) is ml:
            del self._open[ml.name]

    async def _new_ledger_id(self, above: int = 0) -> int:
        """A new ledger id greater than ``above`` (:class:`~.ledger_ids.LedgerIds`)."""
        return await self.ledger_ids.next(above)

    async def close(self) -> None:
        """Close every open managed ledger (a clean shutdown), then stop the backend."""
        self._closed = True
        for task in list(self._opening.values()):
            try:
                await task
            except Exception:
                pass
        slots = asyncio.Semaphore(CLOSE_CONCURRENCY)

        async def close(ml: ManagedLedger) -> None:
            async with slots:  # 100,000 at once would queue 100,000 seals and writes together
                await ml.close()

        await asyncio.gather(*(close(ml) for ml in list(self._open.values())), return_exceptions=True)
        await self.backend.close()

    def abandon(self) -> None:
        """Drop everything as a crash would: stop the backend without finishing
        queued work, close files, write nothing. For tests simulating kill -9."""
        self._closed = True
        self.backend.abandon()
        for ml in list(self._open.values()):
            ml._abandon()
        self._open.clear()

    async def delete(self, name: str) -> None:
        """Delete the managed ledger ``name``: its cursors, metadata and files.

        Raises ``ManagedLedgerNotFoundError`` if it does not exist.
        """
        check_name(name)
        ml = self._open.get(name)
        if ml is not None:
            await ml.close()
        key = f"{ROOT}/{name}"
        try:
            record = await self.store.get(key)
            if record is None:
                raise ManagedLedgerNotFoundError(f"managed ledger {name!r} does not exist")
            doc = json.loads(record.value)
            base = f"{key}/cursors"
            for child in await self.store.children(base):
                try:
                    await self.store.delete(f"{base}/{child}")
                except KeyNotFound:
                    pass
            await self.store.delete(key, record.version)
        except BadVersion as exc:
            raise ManagedLedgerFencedError(f"managed ledger {name!r} changed while deleting it") from exc
        except MetadataError as exc:
            raise StorageError(f"deleting managed ledger {name!r} failed: {exc}") from exc
        for ledger_doc in doc.get("ledgers", []):
            await self.backend.delete(int(ledger_doc["id"]))
        for ledger_id in doc.get("prepared", []):  # created ahead and never recorded (a crash, a takeover)
            await self.backend.fence(int(ledger_id))  # a zombie's commits into it fail from here
            await self.backend.delete(int(ledger_id), fenced=True)

    async def exists(self, name: str) -> bool:
        """Whether the managed ledger ``name`` is stored (one metadata read,
        unlike scanning ``list_names``). ValueError for a bad name."""
        check_name(name)
        if name in self._open:
            return True
        record = await self.store.get(f"{ROOT}/{name}")
        return record is not None and _is_ml_record(record.value)

    async def list_names(self) -> list[str]:
        """Names of all managed ledgers in the metadata store, sorted."""
        names: list[str] = []

        async def walk(key: str, prefix: str) -> None:
            for child in await self.store.children(key):
                path = f"{key}/{child}"
                record = await self.store.get(path)
                if record is not None and _is_ml_record(record.value):
                    names.append(prefix + child)
                await walk(path, f"{prefix}{child}/")

        await walk(ROOT, "")
        return sorted(names)

    async def remove_orphaned_ledgers(self) -> list[int]:
        """Delete ledger files that no managed ledger's metadata names; return their ids.

        A crash between creating a ledger file and recording it (a rollover,
        the new ledger of a recovery) or between dropping a trimmed ledger
        from metadata and unlinking its files leaves such orphans behind;
        nothing can ever read them. Call before opening any managed ledger
        (the factory refuses once one is open or opening, as a ledger being
        created would look orphaned). Deletes nothing when the metadata
        store names no managed ledger at all while files exist: that is a
        data directory paired with the wrong (or a lost) metadata store, and
        the files are left for an operator. Raises StorageError if the
        metadata cannot be read.
        """
        if self._open or self._opening:
            raise StorageError("orphaned ledgers can only be removed before any managed ledger is opened")
        on_disk = await self.backend.stored_ledger_ids()
        if not on_disk:
            return []
        referenced: set[int] = set()
        found_any = False

        async def walk(key: str) -> None:
            nonlocal found_any
            for child in await self.store.children(key):
                path = f"{key}/{child}"
                record = await self.store.get(path)
                if record is not None and _is_ml_record(record.value):
                    found_any = True
                    referenced.update(int(d["id"]) for d in json.loads(record.value)["ledgers"])
                await walk(path)

        try:
            await walk(ROOT)
        except MetadataError as exc:
            raise StorageError(f"cannot list managed ledgers to find orphaned ledgers: {exc}") from exc
        if not found_any:
            log.warning("%d stored ledgers but no managed ledger in the metadata store: leaving them",
                        len(on_disk))
            return []
        orphans = sorted(on_disk - referenced)
        for ledger_id in orphans:
            log.warning("deleting orphaned ledger %d (no managed ledger names it)", ledger_id)
            await self.backend.delete(ledger_id)
        return orphans

    @property
    def managed_ledgers(self) -> dict[str, ManagedLedger]:
        """The open managed ledgers by name (a copy)."""
        return dict(self._open)


def _is_ml_record(value: bytes) -> bool:
    try:
        doc = json.loads(value)
    except ValueError:
        return False
    return isinstance(doc, dict) and "ledgers" in doc


async def open_factory(data_dir: Path, store: MetadataStore, config: StorageConfig, *,
                       session_ttl_s: float = 10.0, own_dir: Path | None = None) -> ManagedLedgerFactory:
    """The factory ``config.backend`` asks for: segment files under
    ``data_dir`` (``"file"``), or ledgers in the object store at
    ``config.object_store_url`` with their index in ``store``
    (``"object"``). Raises ``StorageError`` (one line) for a bad object
    store URL; whether the store answers is checked by the broker command
    at start (``magnetar.objectstore.s3.check_object_store``).

    ``session_ttl_s``: the TTL of an object backend's writer session
    (the broker's own session TTL: a writer fence lives as long as a broker
    would, :mod:`.object.writer_fence`). ``own_dir``: the broker's own data
    directory (None: ``data_dir``), never shared with another broker: an
    object backend keeps its spill under it (``SPILL_DIR``, emptied at
    start; ``config.object_spill_max_bytes``, 0: none) and its copies of
    commit objects (``COPIES_DIR``, the same; ``config.object_copies_max_bytes``).

    A new backend is one more branch here (``config.backend`` names it).
    """
    if config.backend != "object":
        return ManagedLedgerFactory(data_dir, store, config)
    # Imported here: a broker on files never loads the S3 client.
    from ..objectstore.s3 import open_object_store
    from ..objectstore.store import ObjectStoreError
    from .object.object_backend import ObjectBackend

    try:
        objects = open_object_store(config.object_store_url)  # `magnetar broker` checked it works
    except ObjectStoreError as exc:
        raise StorageError(f"object store: {exc}") from None
    budget = CacheBudget(config.cache_budget_bytes)
    backend = ObjectBackend(store, objects, commit_interval_ms=config.object_commit_interval_ms,
                            commit_max_bytes=config.object_commit_max_bytes,
                            read_cache_bytes=config.read_cache_bytes, cache_budget=budget,
                            profile=config.object_storage_profile,
                            put_budget_per_s=config.object_put_budget_per_s,
                            put_budget_floor_per_s=config.object_put_budget_floor_per_s, layout=config.object_layout,
                            session_ttl_s=session_ttl_s, sections_per_ledger=config.object_sections_per_ledger,
                            spill_dir=Path(own_dir or data_dir) / SPILL_DIR,
                            spill_max_bytes=config.object_spill_max_bytes,
                            collect_interval_s=config.object_collect_interval_s,
                            close_compact_s=config.object_close_compact_s,
                            copies_dir=Path(own_dir or data_dir) / COPIES_DIR,
                            copies_max_bytes=config.object_copies_max_bytes)
    return ManagedLedgerFactory(data_dir, store, config, backend=backend, cache_budget=budget)
