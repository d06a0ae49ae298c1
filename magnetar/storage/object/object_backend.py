"""Ledgers on object storage: the second :class:`~..backend.LedgerBackend`
(``--storage object``).

The broker keeps no state of its own: entries are in objects (S3 or any
S3-compatible store), their index and the fence in the metadata store
(layout: :mod:`.index`). Writes are gathered across every ledger of
the broker into one object per commit interval and committed in one
metadata transaction (:mod:`.commit`); a batch is acknowledged only
after that transaction. Reads of recent entries come from the managed
ledger's tail cache; older ones by ranged GETs of whole sections, cached
(:mod:`.section_cache`).

Fencing is the metadata compare: ``fence`` bumps the ledger record's
version, every later commit of the old writer fails its compare
(``ManagedLedgerFencedError``: no receipt). ``recover`` then reads the
index, which holds every entry any writer ever acknowledged. Transfers and
failovers move no data: the new owner reads the index.

A sealed ledger is compacted in the background into per-ledger chunk
objects or an index object (:mod:`.compactor`, scheduled by
:mod:`.compactions`); commit objects nobody names any more
are deleted by the collector, which every backend runs every
``collect_interval_s``. Deleting a ledger deletes its index records and its
chunk objects.

Two index layouts live side by side, named by each ledger's record
(:mod:`.index`): format 1 (a compare and a section record per ledger per
commit) and format 2 (a fence per writer, :mod:`.writer_fence`, and one
record per commit, :mod:`.commit_records`). ``layout`` says which a new
ledger gets; a ledger keeps its own for life, so both are read and written
at once and nothing is migrated.
"""
from __future__ import annotations

import asyncio
import logging
import random
import time
from bisect import bisect_right

from ...formats import raise_format
from ...metadata.store import (BadVersion, Compare, Delete, KeyNotFound, MetadataError, MetadataSession,
                               MetadataStore, Put)
from ...objectstore.store import ObjectNotFound, ObjectStore, ObjectStoreError
from ..backend import READ_CHUNK_BYTES, BackendStats, CreateBeside, WriteCallback
from ..cache import CacheBudget
from ..errors import CorruptLedgerError, StorageError
from ..framing import HEADER_SIZE, parse_frames
from .profiles import check_profile, gather_s
from .put_budget import PutBudget
from .live_writers import LiveWriters
from .budget_pacer import BudgetPacer
from .range_gets import RangeGets
from .pending_sections import PendingSections
from .read_windows import Pending, ReadWindows, WINDOW_SECTIONS
from .section_cache import SectionCache
from .commit_copies import CommitCopies
from .commit import Committer
from . import object_ledger
from .object_ledger import ObjectLedger, draw_max_sections
from .kept_sections import KeptSections, SectionKeeper
from .spilled_sections import SpilledSections
from .compactor import collect_orphans, delete_chunks, delete_object
from .compaction_rounds import CompactionRounds
from .compactions import INDEXED_LAYOUT, Compactions
from .commit_records import RecordScans
from .index import (
    LAYOUT_FORMAT, ROOT, Section, check_ledger_record, compacted_key, contiguous, ledger_key, ledger_layout,
    ledger_record, read_sections, write_in_chunks,
)
from .ledger_index import decode_index, marker_index
from .fence_batches import FenceBatches
from .writer_fence import WriterFence

log = logging.getLogger(__name__)

#: A read (of more than one entry) that misses the section cache also
#: fetches the ledger's next sections, up to this many bytes and sections
#: (one turn: coalesced with the other ledgers' reads of the same objects,
#: and in parallel).
READ_AHEAD_BYTES = 4 * 1024 * 1024
READ_AHEAD_SECTIONS = 32


class _ObjectGone(CorruptLedgerError):
    """A section's object is not in the store (read again from a fresh index, once)."""


class ObjectBackend:
    """Ledgers in ``objects`` with their index in ``store``.

    ``commit_interval_ms``/``commit_max_bytes``: how long a batch of the
    ``cost`` profile waits for others at most, and how much one commit
    gathers (see :mod:`.commit`). ``profile``: the storage profile of a
    ledger nobody chose one for (:mod:`.profiles`; ``cost`` here, so a
    backend built with an interval gathers for it; the broker passes its
    ``object_storage_profile``). ``put_budget_per_s``: commits begun per
    second at most (:mod:`.put_budget`; 0: no budget);
    ``put_budget_floor_per_s``: the least its rate goes down to while the
    loop is short of cores (:mod:`.budget_pacer`; None: the rate never
    moves). ``read_cache_bytes``:
    the section cache's size, inside ``cache_budget`` when given.
    ``layout``: the index layout format of the ledgers it creates (1 or 2;
    3: format 2, and ledgers of small sections compacted from the store get
    an index object, not chunks: :mod:`.ledger_index`);
    ``session_ttl_s``: the TTL of the metadata session a format-2 writer's
    fence is tied to. ``sections_per_ledger``: a ledger it creates is
    ``full`` at this many sections at most (None: ``MAX_SECTIONS_PER_LEDGER``;
    the broker passes its ``object_sections_per_ledger``), each at its own
    point below it (:func:`~.object_ledger.draw_max_sections`: ledgers
    filled together roll over apart). ``rng``: where those are drawn.
    ``spill_dir`` (with ``spill_max_bytes`` > 0): where the writer keeps
    its commit objects for its ledgers' compaction (:mod:`.spilled_sections`:
    every ledger sealed whole compacted into chunks from them; emptied
    now); None: in memory, 16 MiB (:mod:`.kept_sections`). ``copies_dir``
    (with ``copies_max_bytes`` > 0): where commit objects are copied for
    the compaction of the ledgers it opens from the store (:mod:`.commit_copies`:
    chunked, not indexed; emptied now); None: those are indexed.
    """

    def __init__(self, store: MetadataStore, objects: ObjectStore, *, commit_interval_ms: float = 20,
                 commit_max_bytes: int = 8 * 1024 * 1024, read_cache_bytes: int = 32 * 1024 * 1024,
                 cache_budget: CacheBudget | None = None, put_timeout_s: float = 10.0,
                 session: str | None = None, collect_interval_s: float | None = 300.0,
                 profile: str = "cost", put_budget_per_s: float = 0,
                 put_budget_floor_per_s: float | None = None, layout: int = LAYOUT_FORMAT,
                 session_ttl_s: float = 10.0, sections_per_ledger: int | None = None,
                 rng: random.Random | None = None, spill_dir=None, spill_max_bytes: int = 0,
                 close_compact_s: float = 0.0, copies_dir=None, copies_max_bytes: int = 0) -> None:
        if layout not in (1, 2, INDEXED_LAYOUT):
            raise ValueError(f"object layout format must be 1, 2 or 3; got {layout!r}")
        self.layout = layout
        self.sections_per_ledger = sections_per_ledger
        #: How long a clean close lets the compactions of the ledgers it sealed finish.
        self.close_compact_s = close_compact_s
        self._rng = rng or random.Random()
        self.session_ttl_s = session_ttl_s
        self._writer: WriterFence | None = None  # format 2: the fence of the ledgers created now
        self._sessions: list[MetadataSession] = []
        self._writer_lock = asyncio.Lock()
        #: Recoveries' shared reads of format-2 writers' commit records.
        self.records = RecordScans(store)
        self.store = store
        self.objects = objects
        self.profile = check_profile(profile)
        #: Committed sections' bytes of the ledgers this backend writes, for their compaction.
        self.kept: SectionKeeper = (SpilledSections(spill_dir, spill_max_bytes)
                                    if spill_dir is not None and spill_max_bytes > 0 else KeptSections())
        put_budget = PutBudget(put_budget_per_s)
        self.committer = Committer(store, objects, interval_s=commit_interval_ms / 1000,
                                   max_bytes=commit_max_bytes, put_timeout_s=put_timeout_s, session=session,
                                   budget=put_budget, kept=self.kept)
        if put_budget_floor_per_s is not None:  # judged by the commits' own latency
            self.committer.pacer = BudgetPacer(put_budget, put_budget_floor_per_s,
                                               self.committer.timings.phases["total"])
        self.cache = SectionCache(read_cache_bytes, cache_budget)
        #: Sections that compactions from the store will fetch: a GET of their object reads them too.
        self.pending = PendingSections()
        #: Reads of commit objects, coalesced per object (cold reads, compactions).
        #: Sections cold readers read next: a GET of their object reads them too (.read_windows).
        self.windows = ReadWindows()
        self.gets = RangeGets(objects, pending=Pending(self.pending, self.windows))
        self._epochs: dict[int, int] = {}  # ledgers this backend writes -> their epoch
        #: The sealed ledgers' compactions: when, how, running.
        self.compactions = Compactions(store, objects, layout=layout, kept=self.kept, pending=self.pending,
                                       gets=self.gets, budget=self.committer.budget, records=self.records,
                                       live_writers=LiveWriters(store, self._own_writer), load=self._load_sections,
                                       copies=(CommitCopies(objects, copies_dir, copies_max_bytes)
                                               if copies_dir is not None and copies_max_bytes > 0 else None))
        self._collect_interval_s = collect_interval_s
        self._collector: asyncio.Task | None = None
        #: Fences of format-2 ledgers, gathered per writer (a takeover asks for many at once).
        self.fences = FenceBatches(store, self._fenced_record)

    # ---------------------------------------------------------------- writes

    async def create(self, ledger_id: int) -> ObjectLedger:
        writer, value = await self._new_record(ledger_id)
        try:
            epoch = await self.store.put(ledger_key(ledger_id), value, -1)
        except BadVersion as exc:
            raise StorageError(f"ledger {ledger_id} exists already (two writers?)") from exc
        except MetadataError as exc:
            raise StorageError(f"creating ledger {ledger_id} failed: {exc}") from exc
        return self._created(ledger_id, epoch, writer)

    async def create_beside(self, ledger_id: int) -> CreateBeside:
        # The ledger's record, created (version -1: it must not exist) in the caller's transaction.
        writer, value = await self._new_record(ledger_id)
        key = ledger_key(ledger_id)
        return CreateBeside([Compare(key, -1)], [Put(key, value)],
                            lambda versions: self._created(ledger_id, versions[0], writer))

    async def _new_record(self, ledger_id: int) -> tuple[WriterFence | None, bytes]:
        """The writer fence (format 2 and later) and the record of a new ledger."""
        if self._collector is None and self._collect_interval_s:
            self._collector = asyncio.get_running_loop().create_task(self._collect_periodically())
        try:
            if self.layout >= 2:
                writer = await self._current_writer()
                return writer, ledger_record("open", writer.writer, layout=2, since=writer.next_seq)
            return None, ledger_record("open", self.committer.session)
        except MetadataError as exc:
            raise StorageError(f"creating ledger {ledger_id} failed: {exc}") from exc

    def _created(self, ledger_id: int, epoch: int, writer: WriterFence | None) -> ObjectLedger:
        """The handle of a ledger whose record was just created at ``epoch``."""
        self._epochs[ledger_id] = epoch
        self.kept.start(ledger_id)
        maximum = self.sections_per_ledger or object_ledger.MAX_SECTIONS_PER_LEDGER
        ledger = ObjectLedger(ledger_id, epoch, max_sections=draw_max_sections(maximum, self._rng))
        ledger.writer = writer
        ledger.kept = self.kept
        self.set_profile(ledger, None)
        return ledger

    def _own_writer(self) -> str | None:
        return self._writer.writer if self._writer is not None else None

    async def _current_writer(self) -> WriterFence:
        """The writer fence of the format-2 ledgers created now: a new one
        (with a metadata session of its own) at first, and after the last
        one died (its session ended: its ledgers are all refused).
        MetadataError from the store."""
        async with self._writer_lock:
            if self._writer is None or self._writer.dead:
                if self._writer is None:
                    # Before the first format-2 record: brokers that read only format 1 refuse the data set.
                    await raise_format(self.store, "object_layout", 2)
                session = await self.store.create_session(self.session_ttl_s)
                self._sessions.append(session)
                writer = WriterFence()
                await writer.start(self.store, session)
                self._writer = writer
            return self._writer

    def set_profile(self, ledger: ObjectLedger, profile: str | None) -> None:
        """Batches of ``ledger`` submitted from now on commit as ``profile``
        says (None: this backend's default); see :mod:`.profiles`."""
        ledger.gather_s = gather_s(profile or self.profile, self.committer.interval_s)

    def submit(self, ledger: ObjectLedger, datas: list[bytes], callback: WriteCallback, loop) -> None:
        self.committer.submit(ledger, datas, callback, loop)

    def submit_many(self, writes: list[tuple], loop) -> None:
        self.committer.submit_many(writes, loop)

    async def seal(self, ledger: ObjectLedger) -> tuple[int, int]:
        # Nothing to write: the sections committed are final once nothing
        # more is pending; the managed ledger records the count.
        await self.committer.drained(ledger)  # everything submitted before is committed (or failed)
        # A commit of it failed (maybe one whose outcome is unknown): its
        # index may hold more than its sections here, so its compaction reads
        # the index and the store, not the bytes kept.
        if ledger.error is not None:
            self.kept.drop(ledger.ledger_id)
        else:
            ledger.sealed_whole = True  # its sections are its index while the record is at its epoch
        ledger.fence()
        self._epochs.pop(ledger.ledger_id, None)
        self._compact_later(ledger)
        return ledger.entry_count, ledger.size

    def _compact_later(self, ledger: ObjectLedger) -> None:
        """Compact the sealed ``ledger`` in the background (:mod:`.compactions`)."""
        self.compactions.later(ledger)

    @property
    def rounds(self) -> CompactionRounds:
        """The writer's sealed ledgers waiting for their compaction round."""
        return self.compactions.rounds

    @property
    def _compacting(self) -> dict[int, asyncio.Task]:
        return self.compactions.running

    # ------------------------------------------------------- fence, recover

    async def fence(self, ledger_id: int) -> None:
        key = ledger_key(ledger_id)
        try:
            while True:
                record = await self.store.get(key)
                if record is None:
                    return  # never created: recover finds nothing
                check_ledger_record(key, record.value)  # a newer layout is not ours to fence
                layout, doc = ledger_layout(record.value)
                if layout == 2:  # its writer's fence names it too, in the same transaction
                    await self.fences.fence(key, str(doc["writer"]))
                    return
                try:
                    await self.store.put(key, ledger_record("fenced", self.committer.session), record.version)
                    return
                except (BadVersion, KeyNotFound):
                    continue  # someone else fenced (or the writer moved) meanwhile: again
        except MetadataError as exc:
            raise StorageError(f"fencing ledger {ledger_id} failed: {exc}") from exc

    def _fenced_record(self, value: bytes) -> bytes:
        _, doc = ledger_layout(value)
        return ledger_record("fenced", str(doc["writer"]), layout=2, since=doc.get("from"),
                             fenced_by=self.committer.session)

    async def recover(self, ledger_id: int) -> ObjectLedger | None:
        try:
            record = await self.store.get(ledger_key(ledger_id))
            if record is None:
                return None
            check_ledger_record(ledger_key(ledger_id), record.value)
        except MetadataError as exc:
            raise StorageError(f"recovering ledger {ledger_id} failed: {exc}") from exc
        sections, compacted = await self._load_sections(ledger_id)
        ledger = ObjectLedger(ledger_id, None, contiguous(sections))
        ledger.compacted = compacted
        self._compact_later(ledger)
        return ledger

    async def open_sealed(self, ledger_id: int, entries: int) -> ObjectLedger:
        sections, compacted = await self._load_sections(ledger_id)
        sections = contiguous(sections)
        found = sections[-1].end() if sections else 0
        if found < entries:
            raise CorruptLedgerError(f"ledger {ledger_id}: metadata says {entries} entries, its index holds {found}")
        ledger = ObjectLedger(ledger_id, None, sections)
        ledger.compacted = compacted
        self._compact_later(ledger)
        return ledger

    async def _load_sections(self, ledger_id: int) -> tuple[list[Section], bool]:
        """The ledger's sections (its chunks once compacted, or the sections
        its index object lists) and whether compacted.

        Its owner may be compacting it meanwhile (a move seals the ledger,
        then compacts it): the marker is written after every chunk record
        (the index object) and before any section record is deleted, so
        sections read while the marker was still absent afterwards are
        complete; if it appeared meanwhile, the chunks (index object) are."""
        try:
            marker = await self.store.get(compacted_key(ledger_id))
            if marker is not None:
                return await self._compacted_sections(ledger_id, marker.value), True
            sections = await self._read_index(ledger_id, "s")
            marker = await self.store.get(compacted_key(ledger_id))
            if marker is not None:  # compacted while we read: its section records may be half deleted
                return await self._compacted_sections(ledger_id, marker.value), True
        except MetadataError as exc:
            raise StorageError(f"reading the index of ledger {ledger_id} failed: {exc}") from exc
        return sections, False

    async def _compacted_sections(self, ledger_id: int, marker: bytes) -> list[Section]:
        """A compacted ledger's chunks, or its index object's sections if the marker names one."""
        doc = marker_index(marker)
        if doc is None:
            return await self._read_index(ledger_id, "c")
        try:
            return decode_index(doc["index"], await self.objects.get(doc["index"]))
        except ObjectNotFound as exc:  # written before the marker, deleted after it: the ledger is being deleted
            raise StorageError(f"ledger {ledger_id}: its index object {doc['index']} is gone") from exc
        except ObjectStoreError as exc:
            raise StorageError(f"reading the index object of ledger {ledger_id} failed: {exc}") from exc

    async def _read_index(self, ledger_id: int, kind: str) -> list[Section]:
        """The ledger's sections (``s``) or chunks (``c``) as recorded now:
        a format-2 ledger's sections are in its writer's commit records."""
        if kind == "s":
            key = ledger_key(ledger_id)
            record = await self.store.get(key)
            if record is not None:
                check_ledger_record(key, record.value)
                layout, doc = ledger_layout(record.value)
                if layout == 2:
                    return await self.records.sections(str(doc["writer"]), int(doc.get("from", 0)), ledger_id)
        return await read_sections(self.store, ledger_id, kind)

    async def taken_over(self, ledger_id: int) -> bool:
        epoch = self._epochs.get(ledger_id)
        if epoch is None:
            return False
        try:
            record = await self.store.get(ledger_key(ledger_id))
        except MetadataError:
            return False
        return record is None or record.version != epoch

    # ------------------------------------------------------------------ reads

    async def read(self, ledger: ObjectLedger, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        try:
            return await self._read(ledger, first, last, max_bytes)
        except _ObjectGone:
            if ledger.epoch is not None:
                raise  # a ledger we write: our own index, nobody else compacts it
            # The index this broker loaded named commit objects that are gone:
            # another broker (an owner that lost the ledger while compacting
            # it) finished compacting after our load, and the collector then
            # deleted what only the old section records named. Read the index
            # again: if it changed, the chunks hold the entries.
            sections, compacted = await self._load_sections(ledger.ledger_id)
            sections = contiguous(sections)
            if sections == ledger.sections:
                raise
            log.info("ledger %d: its index changed since it was loaded (compacted elsewhere): reading it again",
                     ledger.ledger_id)
            ledger.use(sections, compacted=compacted)
            return await self._read(ledger, first, last, max_bytes)

    async def _read(self, ledger: ObjectLedger, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        i = bisect_right(ledger.firsts, first) - 1
        if i < 0 or first >= ledger.entry_count:
            raise StorageError(f"ledger {ledger.ledger_id} has no entry {first}")
        section = ledger.sections[i]
        if last > first and not self.cache.holds((section.key, section.offset)):
            # a read of one entry is a probe (a topic's load reads its last
            # entry, a Spark job's planning a partition's first): no read-ahead
            self._read_ahead(ledger, i + 1)
        entries = await self.cache.get((section.key, section.offset), lambda: self._fetch(ledger, section))
        out = entries[first - section.first:min(last, section.end() - 1) - section.first + 1]
        limit = READ_CHUNK_BYTES if max_bytes is None else min(READ_CHUNK_BYTES, max_bytes + HEADER_SIZE)
        total = 0
        for n, data in enumerate(out):
            total += len(data) + HEADER_SIZE
            if total > limit and n:
                return out[:n]
        return out

    def _read_ahead(self, ledger: ObjectLedger, i: int) -> None:
        """Fetch sections ``i..`` of ``ledger`` into the cache in the background
        (a cold reader goes on to them next; see READ_AHEAD_*)."""
        budget = min(READ_AHEAD_BYTES, self.cache.max_bytes // 4)
        loop = asyncio.get_running_loop()
        # announced first: the GETs below (and the other readers') cover and keep them
        self.windows.ahead(ledger.ledger_id, ledger.sections[i:i + WINDOW_SECTIONS])
        for section in ledger.sections[i:i + READ_AHEAD_SECTIONS]:
            budget -= section.length
            if budget < 0:
                break
            key = (section.key, section.offset)
            if not self.cache.holds(key):
                task = loop.create_task(self.cache.get(key, lambda s=section: self._fetch(ledger, s)))
                task.add_done_callback(_quiet)

    async def _fetch(self, ledger: ObjectLedger, section: Section) -> list[bytes]:
        try:
            buf = await self.gets.get(section.key, section.offset, section.offset + section.length)
            self.windows.taken(ledger.ledger_id, section.key)
        except ObjectNotFound as exc:
            raise _ObjectGone(
                f"ledger {ledger.ledger_id}: object {section.key} of entries {section.first}.. is gone") from exc
        except ObjectStoreError as exc:
            raise StorageError(f"reading ledger {ledger.ledger_id} from {section.key} failed: {exc}") from exc
        try:
            return parse_frames(buf, section.count)
        except ValueError as exc:
            raise CorruptLedgerError(f"ledger {ledger.ledger_id}, object {section.key}: {exc}") from exc

    # --------------------------------------------------------------- delete

    async def delete(self, ledger_id: int, ledger: ObjectLedger | None = None, *, fenced: bool = False) -> None:
        """Delete the ledger's index records, then its record. Its objects
        are shared: the collector deletes those nobody names any more.
        ``fenced`` changes nothing: a commit compares the ledger's record,
        and a deleted record fails every compare."""
        # Ours to write and its handle not here: our own commits must be fenced too.
        held_elsewhere = ledger is None and ledger_id in self._epochs
        if ledger is not None:
            await self.committer.drained(ledger)
            ledger.fence()
        self._epochs.pop(ledger_id, None)
        self.kept.drop(ledger_id)
        await self.compactions.discard(ledger_id)
        base = ledger_key(ledger_id)
        try:
            record = await self.store.get(base)
            if record is not None:
                check_ledger_record(base, record.value)
                layout, doc = ledger_layout(record.value)
                ours = self._writer is not None and doc.get("writer") == self._writer.writer
                if layout == 2 and not (ours and not held_elsewhere):
                    # Another writer (or ours, without its handle here) may hold it:
                    # fenced like a takeover, so no receipt of it follows the deletion.
                    await self.fences.fence(base, str(doc["writer"]))
            marker = await self.store.get(compacted_key(ledger_id))
            indexed = marker_index(marker.value) if marker is not None else None
            chunk_names = await self.store.children(f"{base}/c")
            chunks = [Section.decode(int(n), r.value) for n, r in zip(chunk_names, await asyncio.gather(
                *(self.store.get(f"{base}/c/{n}") for n in chunk_names))) if r is not None]
            keys = [f"{base}/c/{n}" for n in chunk_names]
            keys += [f"{base}/s/{n}" for n in await self.store.children(f"{base}/s")]
            keys.append(compacted_key(ledger_id))
            await write_in_chunks(self.store, [], [Delete(k) for k in keys])
            await self.store.transaction([], [Delete(base)])
        except MetadataError as exc:
            raise StorageError(f"deleting ledger {ledger_id} failed: {exc}") from exc
        await delete_chunks(self.objects, chunks)  # its commit objects go to the collector
        if indexed is not None:  # its entries stay in commit objects: no span names them now
            await delete_object(self.objects, indexed["index"])

    async def stored_ledger_ids(self) -> set[int]:
        try:
            return {int(name) for name in await self.store.children(ROOT) if name.isdigit()}
        except MetadataError as exc:
            raise StorageError(f"listing ledgers failed: {exc}") from exc

    # -------------------------------------------------------------- lifetime

    async def _collect_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._collect_interval_s * random.uniform(0.5, 1.5))  # brokers out of step
            try:
                await collect_orphans(self.store, self.objects)
            except StorageError as exc:
                log.warning("%s", exc)

    def _stop_background(self) -> None:
        self.compactions.stop()
        if self._collector is not None:
            self._collector.cancel()

    def stats(self) -> BackendStats:
        """Counters ``puts`` (objects written), ``transactions`` (metadata
        transactions that committed them, retries included), ``commits``,
        ``gets`` (ranged GETs of reads and compactions, the copies' of
        commit objects among them; ``chunk_gets`` of them of compacted chunk objects), ``budget_wait_s``
        (time commits waited for the PUT budget), ``core_wait_s`` (the
        loop's wait for a core, as the budget's pacer read it: 0 without
        one); ``compacted_kept``,
        ``compacted_indexed``, ``compacted_store``, ``compacted_copied`` and ``compactions_failed``
        (:class:`~.compactions.Compactions`); and three levels, not counters:
        ``put_budget_rate`` (the PUT budget's rate now, 0: none),
        ``compactions_pending`` (sealed ledgers whose compaction is running
        or waiting, a round's included) and ``kept_bytes`` (commit bytes kept
        for them, in memory or in the spill);
        a histogram per phase of a commit (:mod:`.commit_timings`)."""
        c, compactions = self.committer, self.compactions
        return BackendStats("object", {"puts": c.puts, "transactions": c.transactions, "commits": c.commits,
                                       "chained": c.chained, "chain_resends": c.chain_resends,
                                       "chain_retries": c.chain_retries,
                                       "gets": self.gets.gets + (compactions.copies.gets if compactions.copies else 0),
                                       "chunk_gets": self.gets.chunk_gets,
                                       "budget_wait_s": c.budget.waited_s,
                                       "core_wait_s": c.pacer.core_wait_s if c.pacer is not None else 0,
                                       "put_budget_rate": c.budget.rate if c.budget.limited else 0,
                                       **{f"compacted_{k}": n for k, n in compactions.compacted.items()},
                                       "compactions_failed": compactions.failed,
                                       "compactions_pending": len(compactions.running) + len(compactions.rounds),
                                       "kept_bytes": self.kept.bytes},
                            c.timings.phases)

    async def close(self) -> None:
        """Commit what is queued, then close the object store (the backend owns it)
        and the writer fences' sessions (their ledgers take no more commits).
        First the compactions under way (those of the ledgers the broker's
        closing sealed among them) may finish for ``close_compact_s``: only
        this broker has their bytes (its spill is emptied at start), and a
        ledger it leaves uncompacted is compacted by whoever opens it next,
        from the store. What is left then stops; it is redone when the
        ledger is next opened."""
        if self.close_compact_s > 0:
            if self.committer.pacer is not None:  # lowered while the loop was short of cores: no commit now
                self.committer.pacer.stop()
            began = time.monotonic()
            before = sum(self.compactions.compacted.values())
            left = await self.compactions.drain(self.close_compact_s)
            done = sum(self.compactions.compacted.values()) - before
            if done or left:
                log.info("closing: compacted %d sealed ledgers in %.1f s, %d left to their next opener",
                         done, time.monotonic() - began, left)
        self._stop_background()
        await self.fences.close()
        try:
            await self.committer.close()
        finally:
            for session in self._sessions:
                try:
                    await session.close()
                except MetadataError:
                    pass  # it expires by itself

            self.cache.clear()
            self.kept.clear()
            if self.compactions.copies is not None:
                self.compactions.copies.clear()
            self.gets.forget()
            await self.objects.close()

    def abandon(self) -> None:
        self._stop_background()
        self.committer.abandon()


def _quiet(task: asyncio.Task) -> None:
    """A read-ahead that failed: the reader's own read reports it, if it comes."""
    if not task.cancelled():
        task.exception()
