"""When and how the object backend compacts its sealed ledgers: the
scheduling around :func:`~.compactor.compact_ledger`.

For each sealed ledger (sealed by its writer, or opened from the store by a
recovery or a load) :meth:`Compactions.later` decides once, and the
compaction it starts is told the decision:

- **kept**: its writer kept the bytes of all its sections (in memory,
  :mod:`.kept_sections`, or in its spill on disk, :mod:`.spilled_sections`):
  compacted into chunks from them ``COMPACT_AFTER_S`` after the seal, no
  GET; kept bytes that turn out gone or damaged when read (the spill's
  CRC check) fall back to the next two, decided then;
- **indexed**: from the store, small sections, ``layout`` 3
  (:mod:`.ledger_index`): its section list becomes an index object; it
  reads nothing, so it waits for no round, and its marker goes in a
  transaction shared with the markers of others indexed about then
  (:mod:`.marker_batches`);
- **copied** (with a :class:`~.commit_copies.CommitCopies`): a ledger
  opened from the store that would be indexed is chunked instead, from
  local copies of its commit objects, each GET once for every ledger this
  broker opened (a takeover's waves): its lone cold read is then a GET per
  chunk, not per section. At most ``KEPT_AT_ONCE`` hold their bytes at
  once (the copying holds none);
- **from the store**: its writer's go to the next round
  (:mod:`.compaction_rounds`), compacted in one lockstep with the others
  sealed in it (each commit object read by one GET for all); a ledger
  opened from the store starts ``OPENED_COMPACT_AFTER_S`` after its load
  (loads that come together share the lockstep), its sections *pending*
  meanwhile (:mod:`.pending_sections`). An opened ledger to be indexed,
  unfenced, whose writer is another broker, alive, waits (up to
  ``OPENED_WRITER_WAIT_S``, asking again every ``WRITER_RETRY_S``): that
  writer may be chunking it from its kept bytes (a move, a clean close,
  :mod:`.live_writers`). If the writer's marker lands first, the opener
  reads its chunks from then on.

A ledger compacted already, empty, or whose compaction is running or
waiting is left alone. :meth:`Compactions.discard` (a deletion) takes it out
of its round and cancels its compaction. A clean close first lets them
finish for a while (:meth:`Compactions.drain`: a broker shutting down seals
every ledger it writes, and only it has their bytes; a ledger left
uncompacted is compacted by whoever opens it next, from the store: at
small sections an index object, whose lone cold read costs a GET per
section), then :meth:`Compactions.stop` cancels the rest: each is compacted
when next sealed or opened. Failure modes: a compaction that fails (``StorageError``: the
stores) is logged and left for the next seal or open; nothing is lost, as
readers switch to the compacted form only at the marker.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Awaitable, Callable

from ...formats import raise_format
from ...metadata.store import MetadataError, MetadataStore
from ...objectstore.store import ObjectStore
from ..errors import StorageError
from .commit_copies import CommitCopies
from .commit_records import RecordScans
from .compaction_rounds import CompactionRounds
from .compactor import WriterMayCompact, compact_ledger
from .kept_sections import KeptBytes, SectionKeeper
from .live_writers import LiveWriters
from .ledger_index import small_sections
from .marker_batches import MarkerBatches
from .object_ledger import ObjectLedger
from .pending_sections import PendingSections
from .put_budget import PutBudget
from .range_gets import Lockstep, RangeGets

log = logging.getLogger(__name__)

#: ``layout`` 3: format-2 ledgers whose compaction from the store, for small
#: sections, writes an index object instead of chunks (:mod:`.ledger_index`).
INDEXED_LAYOUT = 3

#: A sealed ledger's compaction begins this long after its seal: ledgers
#: sealed together (many topics rolled over by the same commits, a
#: takeover) compact in one lockstep and share their GETs.
COMPACT_AFTER_S = 0.05
#: The same for a ledger this broker opened from the store (a topic loaded
#: after a restart or a move, by a reader or a recovery): topics are loaded
#: one by one as their clients come (a Spark job's planning asks each
#: partition in turn, a few hundred ms apart), and the ledgers loaded within
#: this long compact in one lockstep, each commit object they share read
#: once. Readers meanwhile read those objects once for all of them too (see
#: :mod:`.pending_sections`).
OPENED_COMPACT_AFTER_S = 1.0
#: Compactions from kept bytes that hold their ledger's bytes at once. The
#: others wait before reading them: a compaction waits for the PUT budget
#: with its bytes in hand, and at 10,000 topics compactions fall behind the
#: seals (941 for 1,942), so every ledger waiting held its bytes (the
#: broker's heap reached 1.9-2.8 GB as the sending ended). The budget
#: paces PUTs by rate, so a few compactions in hand keep it busy.
KEPT_AT_ONCE = 16
#: How long an opened ledger waits for its live writer's compaction, at
#: most, before it is indexed anyway (a clean close waits 10 s by default;
#: a live writer's compactions from kept bytes come within seconds of the
#: seal, unless rollovers queue them behind the PUT budget), and how often
#: it asks again meanwhile.
OPENED_WRITER_WAIT_S = 30.0
WRITER_RETRY_S = 1.0


class Compactions:
    """The compactions of one backend's sealed ledgers (module docstring).
    ``running``: ledger id -> its compaction's task; ``rounds``: the writer's
    ledgers waiting for their round; ``markers``: the shared marker
    transactions of indexed ledgers."""

    def __init__(self, store: MetadataStore, objects: ObjectStore, *, layout: int, kept: SectionKeeper,
                 pending: PendingSections, gets: RangeGets, budget: PutBudget, records: RecordScans,
                 live_writers: LiveWriters | None = None,
                 load: "Callable[[int], Awaitable[tuple[list, bool]]] | None" = None,
                 copies: CommitCopies | None = None) -> None:
        self.store, self.objects, self.layout = store, objects, layout
        #: Local copies of commit objects (None: opened ledgers of small sections are indexed).
        self.copies = copies
        #: Other brokers' writers alive (None: an opened ledger never waits for its writer).
        self.live_writers = live_writers
        #: The backend's read of a ledger's sections as they are now, and whether compacted
        #: (an opened ledger its writer compacted meanwhile reads its chunks from then on).
        self.load = load
        self.kept, self.pending, self.budget, self.records = kept, pending, budget, records
        self._lockstep = Lockstep(gets)
        #: Held while a compaction from kept bytes has them (:data:`KEPT_AT_ONCE`).
        self._holding = asyncio.Semaphore(KEPT_AT_ONCE)
        self.running: dict[int, asyncio.Task] = {}
        self._opened: set[int] = set()  # of those, ledgers opened from the store (not sealed here)
        #: Sealed ledgers waiting to be compacted from the store together.
        self.rounds = CompactionRounds(self._round)
        self.markers = MarkerBatches(store)
        self._indexed_format = False  # the data set's object_layout says 3 (raised by us, once)
        #: Ledgers compacted, by where their bytes came from: ``kept`` (this
        #: writer's, no GET), ``indexed`` (an index object, no data moved),
        #: ``store`` (chunks from GETs), ``copied`` (chunks from local copies of
        #: the commit objects: ledgers opened from the store); ``failed``: compactions that raised
        #: (left for the next seal or open). At /metrics.
        self.compacted = {"kept": 0, "indexed": 0, "store": 0, "copied": 0}
        self.failed = 0

    def later(self, ledger: ObjectLedger) -> None:
        """Compact the sealed ``ledger`` in the background, as the module docstring says."""
        kept = self.kept.take(ledger)
        if (ledger.compacted or not ledger.sections or ledger.ledger_id in self.running
                or ledger.ledger_id in self.rounds):
            return
        if kept is not None:
            self._start(ledger, kept, False)
            return
        # Indexed: it reads nothing, so it waits for no round: spread as its
        # seals are (a round's 1,200 at once queued their PUTs behind the
        # budget's background share, and their transactions at once).
        indexed = self._indexed(ledger)
        if ledger.epoch is not None and not indexed:
            self.rounds.add(ledger)
            return
        if indexed and ledger.epoch is None and self.copies is not None:
            self._start(ledger, None, False, copied=True)
            return
        self._start(ledger, None, indexed)

    def _indexed(self, ledger: ObjectLedger) -> bool:
        """Whether ``ledger``, compacted from the store, gets an index object."""
        return self.layout >= INDEXED_LAYOUT and small_sections(ledger.sections, ledger.size)

    def _round(self, ledgers: list[ObjectLedger]) -> None:
        for ledger in ledgers:  # all join the lockstep before any of them fetches
            if not ledger.compacted and ledger.ledger_id not in self.running:
                self._start(ledger, None, False)  # a round holds only ledgers not indexed

    def _start(self, ledger: ObjectLedger, kept: KeptBytes | None, indexed: bool, *, copied: bool = False) -> None:
        lockstep: "_Taking | _Copied | None"
        lockstep = None if kept is not None or indexed else self._lockstep
        if copied:
            lockstep = _Copied(self.copies, self._holding)
        elif lockstep is not None:
            lockstep.join()  # now: ledgers sealed together are all members before any of them fetches
            self.pending.add(ledger.ledger_id, ledger.sections)
            lockstep = _Taking(lockstep, self.pending, ledger.ledger_id)
        task = asyncio.get_running_loop().create_task(self._compact(ledger, lockstep, kept, indexed))
        self.running[ledger.ledger_id] = task
        if ledger.epoch is None:
            self._opened.add(ledger.ledger_id)
        task.add_done_callback(lambda done: self._ended(ledger.ledger_id, lockstep, done))

    def _ended(self, ledger_id: int, lockstep: "_Taking | _Copied | None", task: asyncio.Task) -> None:
        if self.running.get(ledger_id) is task:  # not a later compaction of it (a round after a fallback)
            del self.running[ledger_id]
            self._opened.discard(ledger_id)
            self.pending.drop(ledger_id)
        if lockstep is not None:
            lockstep.leave()  # here, not in the task: one cancelled before it began ran no ``finally``

    async def _compact(self, ledger: ObjectLedger, lockstep: "_Taking | _Copied | None", kept: KeptBytes | None,
                       indexed: bool) -> None:
        loop = asyncio.get_running_loop()
        opened = ledger.epoch is None
        copied = isinstance(lockstep, _Copied)
        try:
            # seals (loads) that come together join the same lockstep
            await asyncio.sleep(COMPACT_AFTER_S if not opened else OPENED_COMPACT_AFTER_S)
            # An opened ledger to index (or copy) waits while its writer may be chunking it (module docstring).
            waits_until = loop.time() + OPENED_WRITER_WAIT_S if opened and (indexed or copied) else None
            while True:
                try:
                    async with self._holding if kept is not None else contextlib.nullcontext():
                        chunks = await self._compact_now(
                            ledger, lockstep, kept, indexed,
                            waits_until is not None and loop.time() < waits_until)
                    break
                except WriterMayCompact:
                    await asyncio.sleep(WRITER_RETRY_S)
            if not chunks and opened and not ledger.compacted and self.load is not None:
                sections, compacted = await self.load(ledger.ledger_id)  # compacted elsewhere meanwhile?
                if compacted:
                    chunks = sections
        except StorageError as exc:
            self.failed += 1
            log.warning("%s (it is compacted when next sealed or opened)", exc)
            return
        if chunks:
            ledger.use(chunks, compacted=True)

    async def _compact_now(self, ledger: ObjectLedger, lockstep: "_Taking | _Copied | None", kept: KeptBytes | None,
                           indexed: bool, wait_for_writer: bool = False) -> list:
        """The compaction proper: its chunks, or [] (not compacted now)."""
        parts = None
        if kept is not None:
            parts = await kept.parts()  # off the loop for the spill; None: gone or damaged
            if parts is None:  # as if never kept (kept: its writer's, so not opened from the store)
                indexed = self._indexed(ledger)
                log.info("ledger %d: its kept bytes are gone or damaged: %s", ledger.ledger_id,
                         "indexed" if indexed else "compacted from the store in the next round")
                if not indexed:
                    self.running.pop(ledger.ledger_id, None)  # out before its round can come
                    self.rounds.add(ledger)
                    return []
        if indexed and not self._indexed_format:
            try:
                # Before the first indexed marker: brokers that know only chunks refuse the data set.
                await raise_format(self.store, "object_layout", INDEXED_LAYOUT)
            except MetadataError as exc:
                raise StorageError(f"raising the data set's object layout failed: {exc}") from exc
            self._indexed_format = True
        # The ledger's own columns (it is sealed: they change no more), and
        # its writer's layout: compacted from kept bytes, that reads nothing.
        chunks = await compact_ledger(self.store, self.objects, ledger.ledger_id, ledger.sections,
                                      lockstep, self.budget,
                                      kept=parts, epoch=ledger.epoch if ledger.sealed_whole else None,
                                      scans=self.records, indexed=indexed,
                                      markers=self.markers if indexed or parts is not None else None,
                                      layout=(1 if ledger.writer is None else 2) if ledger.sealed_whole else None,
                                      writer_compacting=self._writer_compacting if wait_for_writer else None)
        if chunks:
            source = ("kept" if parts is not None else "indexed" if indexed
                      else "copied" if isinstance(lockstep, _Copied) else "store")
            self.compacted[source] += 1
        return chunks

    async def _writer_compacting(self, writer: str) -> bool:
        if self.live_writers is None:
            return False
        try:
            return await self.live_writers.compacting(writer)
        except MetadataError as exc:
            raise StorageError(f"asking whether writer {writer} is alive failed: {exc}") from exc

    async def discard(self, ledger_id: int) -> None:
        """Compact ``ledger_id`` no more (it is being deleted): out of its
        round, its compaction cancelled and over when this returns."""
        self.rounds.discard(ledger_id)
        task = self.running.get(ledger_id)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def drain(self, timeout_s: float) -> int:
        """Let the compactions of the ledgers sealed here, running or in the
        round waiting, finish for at most ``timeout_s`` (the backend closes
        cleanly: no commit needs the PUT budget any more, so they get all
        of it). Ledgers opened from the store are not waited for: whoever
        opens them next does as well. Returns how many of those sealed here
        are left unfinished (for :meth:`stop`). Never raises: a compaction
        that fails is counted in ``failed`` as ever."""
        def sealed_here() -> list[asyncio.Task]:
            return [task for lid, task in self.running.items() if lid not in self._opened]

        if timeout_s <= 0:
            return len(sealed_here()) + len(self.rounds)
        self.budget.share_all()
        # Markers back to back: the spacing keeps a busy broker's etcd for its commits, and
        # there are none now; with it, 16 compactions holding their bytes at once
        # (KEPT_AT_ONCE), each till its marker's transaction, chunked ~80 ledgers a second.
        self.markers.spacing_s = 0.0
        self.rounds.flush()  # its ledgers read the store now, rather than never
        deadline = asyncio.get_running_loop().time() + timeout_s
        while tasks := sealed_here():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            # A snapshot: a compaction that falls back to a round joins ``rounds``, flushed below.
            await asyncio.wait(tasks, timeout=left)
            self.rounds.flush()
        return len(sealed_here()) + len(self.rounds)

    def stop(self) -> None:
        """Cancel every compaction, running or waiting (the backend closes)."""
        self.rounds.stop()
        for task in self.running.values():
            task.cancel()
        self.markers.stop()


class _Taking:
    """The lockstep as one compaction uses it: the objects it fetched are
    no longer pending for its ledger (their kept bytes may go)."""

    def __init__(self, lockstep: Lockstep, pending: PendingSections, ledger_id: int) -> None:
        self.lockstep, self.pending, self.ledger_id = lockstep, pending, ledger_id

    async def fetch(self, ranges: list[tuple[str, int, int]]) -> list[bytes]:
        def taken() -> None:
            self.pending.taken(self.ledger_id, {key for key, _, _ in ranges})
        try:
            # Taken as soon as they are asked of the GETs, not once they all
            # came: a round's members ask for every object at once, and until
            # taken each object's bytes stay kept for them (see range_gets).
            return await self.lockstep.fetch(ranges, taken)
        finally:
            taken()

    def leave(self) -> None:
        self.lockstep.leave()


class _Copied:
    """The commit copies as one opened ledger's compaction uses them:
    its objects copied holding no bytes, then, before its ranges are read,
    one of the ``holding`` places (``KEPT_AT_ONCE``: a compaction holds its
    chunk from the read to its PUT, and a wave of 256 of them at 4 MiB
    each would be a gigabyte), kept until it ends (:meth:`leave`)."""

    def __init__(self, copies: CommitCopies, holding: asyncio.Semaphore) -> None:
        self.copies, self.holding = copies, holding
        self._held = False

    async def fetch(self, ranges: list[tuple[str, int, int]]) -> list[bytes]:
        await self.copies.copy(key for key, _, _ in ranges)
        if not self._held:
            await self.holding.acquire()
            self._held = True
        return await self.copies.fetch(ranges)

    def leave(self) -> None:
        if self._held:
            self._held = False
            self.holding.release()
