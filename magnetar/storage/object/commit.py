"""The object backend's write path: gather, PUT one object, commit in one
metadata transaction, then (and only then) complete the batches.

Per backend (per broker), batches of every ledger it writes are gathered
until the earliest of them is due, or until ``max_bytes`` are waiting, and
written as ONE object (``put(if_absent=True)`` under a key
unique to this backend's session). Then ONE metadata transaction commits
it: for each ledger it compares the ledger record's version (the epoch the
writer created it with; a new owner's fence bumps it) and puts the ledger's
new section record, nothing else (no read-backs: a compare and a put per
ledger). A batch completes with ``None`` only after that transaction
succeeded.

Pipeline: up to ``PIPELINE_DEPTH`` commits are under way at once, so the
PUT of one overlaps the transaction of the one before. A commit's
transaction goes once the previous commit's has been sent, chained on it
(:mod:`.commit_chain`: it lands only if that one did), or, when it cannot
be chained, once every earlier commit has ended; receipts go out in commit
order. A section of a later
commit begins where the ledger's earlier (possibly uncommitted) section
ends; before its transaction, a ledger whose earlier commit failed or was
fenced is dropped from it (its batches fail with that error), so a ledger's
recorded sections never have a gap and its batches complete in submission
order.

When a commit begins (:mod:`.profiles`): a batch's ledger says how long it
may wait for others (``gather_s``: 0 for the ``latency`` profile, the
interval for ``cost``); the next commit is due at the earliest arrival +
wait of the queued batches, then waits for room in the pipeline, then for
a token of the broker's PUT budget (:mod:`.put_budget`; while the loop
is short of cores its rate searches for the fastest commits,
:mod:`.budget_pacer`). Every queued
batch goes with it, so ``cost`` batches ride along with a commit a
``latency`` batch started, and batches queued during the waits make the
commit bigger rather than the commits more. With only ``cost`` batches,
commits begin at least an interval apart.

Failures:
- a ledger whose compare fails was fenced by a new owner: its batches
  complete with ``ManagedLedgerFencedError`` (no receipt), the handle
  refuses further batches (those of later commits in the pipeline too),
  and the transaction is retried for the others;
- the PUT fails: retried with a new key (the failed one may have landed:
  an orphan) until ``put_timeout_s``, then every batch of the commit fails
  with ``StorageError``;
- the transaction fails otherwise (metadata store unreachable: it may or may
  not have happened): that chunk's batches fail with ``StorageError`` and
  their ledgers refuse further batches (the managed ledger rolls to a new
  ledger; entries that were in fact committed stay readable, unacknowledged).

More than ``LEDGERS_PER_TRANSACTION`` ledgers in one object take one
transaction per chunk of that many (etcd caps a transaction at 128 ops):
each chunk is atomic for its ledgers (they run concurrently), the fence is
per ledger either way.

That is layout format 1 (:mod:`.index`). A format-2 ledger (its handle
names its writer's :class:`~.writer_fence.WriterFence`) is recorded instead
in its writer's commit record, beside the format-1 chunks and at once with
them: one transaction comparing the writer's fence for every format-2
ledger of the commit (:func:`~.commit_records.record_rows`), with the
same outcomes: fenced ledgers refused, the rest committed, or an unknown
outcome (``StorageError``).

The ledger the committer writes is :class:`~.object_ledger.ObjectLedger`
(its sections, counts and rollover bounds); a commit's batches are grouped
by ledger as columns in :class:`~.commit_groups.CommitGroups`.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Callable

from ...metadata.store import Compare, MetadataError, MetadataStore, Put, TransactionFailed
from ...objectstore.store import ObjectStore, ObjectStoreError
from ..errors import ManagedLedgerFencedError, StorageError
from ..framing import HEADER_SIZE, frames
from .commit_groups import CommitGroups, tell_batch
from .commit_timings import CommitTimings
from .profiles import Gathering
from .kept_sections import SectionKeeper
from .put_budget import PutBudget
from .budget_pacer import BudgetPacer
from .index import commit_object, ledger_key, section_key
from .commit_chain import CommitLink, can_chain, chained_record, follow
from .commit_records import RECORD_LEDGERS, record_rows
from .object_ledger import ObjectLedger
from .writer_fence import WRITERS

log = logging.getLogger(__name__)

LEDGERS_PER_TRANSACTION = 128  # a compare and a put each: etcd's default cap is 128 of each
#: Commits begun and not ended, at most: the PUT of one overlaps the
#: transaction of the one before (chained transactions overlap too).
PIPELINE_DEPTH = 3
#: A commit whose PUT began longer ago than this gives up before its
#: transaction (no receipt): the orphan collector may delete objects older
#: than ``COLLECT_AFTER_S``, and a transaction must never name one it deleted.
MAX_COMMIT_AGE_S = 60.0

Callback = Callable[["BaseException | None"], None]


class Committer:
    """Gathers batches and commits them (see the module docstring)."""

    def __init__(self, store: MetadataStore, objects: ObjectStore, *, interval_s: float, max_bytes: int,
                 put_timeout_s: float = 10.0, session: str | None = None,
                 budget: PutBudget | None = None, kept: SectionKeeper | None = None) -> None:
        self.store = store
        self.objects = objects
        self.interval_s = interval_s  # the ``cost`` profile's gather
        self.max_bytes = max_bytes
        self.budget = budget or PutBudget(0)
        #: Sets the budget's rate while the loop is short of cores (None: as configured; the backend sets it).
        self.pacer: BudgetPacer | None = None
        #: Where each committed section's bytes go for the ledger's compaction (None: nowhere).
        self.kept = kept
        self.put_timeout_s = put_timeout_s
        #: Unique to this backend's life: object keys never collide between
        #: brokers, nor between two lives of one broker.
        self.session = session or uuid.uuid4().hex
        self._seq = 0
        # The queued batches as columns (see CommitGroups): their ledgers, entries and callbacks.
        self._queue: list[ObjectLedger] = []
        self._queue_datas: list = []
        self._queue_callbacks: list[Callback] = []
        self._queued_bytes = 0
        self._gathering = Gathering()  # when the queued batches are due
        self._wake: asyncio.Event | None = None
        self._slot: asyncio.Event | None = None  # set when a commit ends
        self._task: asyncio.Task | None = None
        self._running: set[asyncio.Task] = set()  # commits begun and not ended
        self._stopping = False
        self._pending = 0  # batches queued or committing, all ledgers (each ledger counts its own: ``pending``)
        # Counters for tests, stats and the benchmark.
        self.puts = 0
        self.transactions = 0
        #: Transactions sent while the previous one was unanswered (chained
        #: on it); of those, the ones that overtook it and were sent again
        #: once it landed, and the ones that went again unchained.
        self.chained = 0
        self.chain_resends = 0
        self.chain_retries = 0
        self.commits = 0
        self.timings = CommitTimings()
        #: A list to keep each commit's timeline in (bench/object_tail.py),
        #: or None (the default: nothing kept).
        self.trace: list[dict] | None = None

    # ------------------------------------------------------------ loop side

    def _start(self, loop) -> None:
        """Refuse once stopping; start the commit task on the first batch."""
        if self._stopping:
            raise StorageError("object storage writer is stopped")
        if self._task is None:
            self._wake = asyncio.Event()
            self._slot = asyncio.Event()
            self._task = loop.create_task(self._run())

    def submit(self, ledger: ObjectLedger, datas: list[bytes], callback: Callback, loop) -> None:
        self._start(loop)
        # A batch's wait counts from its arrival, even while a commit runs.
        sooner = self._gathering.arrived(ledger.gather_s, time.monotonic())
        self._queue.append(ledger)
        self._queue_datas.append(datas)
        self._queue_callbacks.append(callback)
        ledger.pending += 1
        self._pending += 1
        self._queued_bytes += sum(map(len, datas)) + HEADER_SIZE * len(datas)
        if sooner or self._queued_bytes >= self.max_bytes:
            self._wake.set()  # only what the gathering waits for: not once per batch

    def submit_many(self, writes: list[tuple], loop) -> None:
        """:meth:`submit` for each ``(ledger, datas, nbytes, callback)`` of
        ``writes`` (one loop pass's hand-over, :mod:`..flush_pass`), with one
        clock reading and at most one wake-up for them all."""
        self._start(loop)
        now = time.monotonic()
        arrived = self._gathering.arrived
        append, append_datas, append_callback = (self._queue.append, self._queue_datas.append,
                                                 self._queue_callbacks.append)
        sooner = False
        gather = None  # the last ledger's gather: most ledgers share one
        nbytes = 0
        for ledger, datas, size, callback in writes:
            if ledger.gather_s != gather:
                gather = ledger.gather_s
                if arrived(gather, now):
                    sooner = True
            append(ledger)
            append_datas(datas)
            append_callback(callback)
            ledger.pending += 1
            nbytes += size
        self._pending += len(writes)
        self._queued_bytes += nbytes
        if sooner or self._queued_bytes >= self.max_bytes:
            self._wake.set()

    async def drained(self, ledger: ObjectLedger) -> None:
        """Return once no batch of ``ledger`` is queued or committing."""
        while ledger.pending:
            if ledger.idle is None or ledger.idle.is_set():
                ledger.idle = asyncio.Event()
            await ledger.idle.wait()

    async def close(self) -> None:
        """Commit everything queued, then stop."""
        self._stopping = True
        if self._task is not None:
            self._wake.set()
            await self._task

    def abandon(self) -> None:
        """Stop at once, as a crash would: queued batches are never told."""
        self._stopping = True
        self._queue.clear()
        self._queue_datas.clear()
        self._queue_callbacks.clear()
        for task in [self._task, *self._running]:
            if task is not None:
                task.cancel()

    # --------------------------------------------------------- commit side

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        previous: CommitLink | None = None  # the last commit begun
        try:
            while True:
                if not self._queue:
                    if self._stopping:
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                # Gather until the earliest queued batch is due (at once for
                # ``latency``, its arrival + the interval for ``cost``: it may
                # have arrived while earlier commits ran, that time counts), or
                # the size bound. With only ``cost`` batches, commits begin at
                # least an interval apart: each was queued after the previous
                # commit took the queue.
                while self._queued_bytes < self.max_bytes and not self._stopping:
                    remaining = self._gathering.due() - time.monotonic()
                    if remaining <= 0:
                        break
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), remaining)
                    except asyncio.TimeoutError:
                        break
                # Room in the pipeline, then a token of the PUT budget; batches
                # arriving meanwhile join this commit (commits grow under load).
                due_at = time.monotonic()
                while len(self._running) >= PIPELINE_DEPTH:
                    self._slot.clear()
                    await self._slot.wait()
                room_at = time.monotonic()
                if self.budget.limited and not self._stopping:
                    if self.pacer is not None:
                        self.pacer.commit_begun()
                    await self.budget.acquire()
                started = self._gathering.oldest()
                batches = (self._queue, self._queue_datas, self._queue_callbacks)
                self._queue, self._queue_datas, self._queue_callbacks, self._queued_bytes = [], [], [], 0
                self._gathering.clear()
                taken_at = time.monotonic()
                self.timings.observe("gather", taken_at - started)
                stamps = None
                if self.trace is not None:
                    stamps = {"first": started, "due": due_at, "room": room_at, "taken": taken_at,
                              "batches": len(batches[0])}
                    self.trace.append(stamps)
                link = CommitLink(loop)
                task = loop.create_task(self._commit(batches, started, previous, link, stamps))
                self._running.add(task)
                task.add_done_callback(self._commit_ended)
                previous = link
        finally:
            if self._running:  # close(): every commit begun ends first
                await asyncio.gather(*self._running, return_exceptions=True)

    def _commit_ended(self, task: asyncio.Task) -> None:
        self._running.discard(task)
        self._slot.set()

    async def _commit(self, batches: tuple[list, list, list], first_at: float, previous: CommitLink | None,
                      link: CommitLink, stamps: dict | None = None) -> None:
        """One commit, from PUT to receipts; ``batches``: its ledgers,
        entries and callbacks (columns). ``link.ended`` resolves when it is
        over (its transaction done or given up), never earlier than
        ``previous.ended``: the next commit's receipts wait for it, and its
        transaction for ``link.sent`` (:mod:`.commit_chain`)."""
        ledgers, _, callbacks = batches
        try:
            await self._put_and_record(batches, first_at, previous, link, stamps)
        except Exception as exc:  # a bug here must not strand the batches, nor let a later commit leave a gap
            log.exception("object commit failed")
            error = StorageError(f"object commit failed: {exc!r}")
            for ledger in ledgers:
                if ledger.error is None:
                    ledger.error = error
            for batch in range(len(callbacks)):
                tell_batch(callbacks, batch, error)
        finally:
            link.tell_sent(None)  # sent nothing (or the waiter is told already)
            link.tell_answered(False)
            ended = link.ended
            if previous is not None and not previous.ended.done():  # cancelled (abandon) while waiting for it
                previous.ended.add_done_callback(lambda _: ended.done() or ended.set_result(None))
            elif not ended.done():
                ended.set_result(None)
            self._pending -= len(ledgers)
            for ledger in ledgers:
                ledger.pending -= 1
                if not ledger.pending and ledger.idle is not None:
                    ledger.idle.set()

    async def _put_and_record(self, batches: tuple[list, list, list], first_at: float,
                              previous: CommitLink | None, link: CommitLink, stamps: dict | None = None) -> None:
        # Group by ledger, in submission order (a ledger's first batch is its
        # group's head); refused ledgers fail at once.
        ledgers, datas_of, callbacks = batches
        groups = CommitGroups(callbacks)
        add = groups.add
        for batch, ledger in enumerate(ledgers):
            if ledger.error is not None:
                tell_batch(callbacks, batch, ledger.error)
                continue
            add(ledger, batch, datas_of[batch])
        if not groups.ledgers:
            return
        # Place each ledger's section in the object: it follows the ledger's
        # sections placed so far, committed or in an earlier commit of the
        # pipeline. Its Section is made once the object's key is final.
        parts: list[bytes] = groups.framed
        firsts, counts, offsets = groups.firsts, groups.counts, groups.offsets
        offset = 0
        lengths = groups.lengths
        for ledger, datas in zip(groups.ledgers, groups.datas):
            framed = frames(datas)
            n = len(framed)
            firsts.append(ledger.placed)
            counts.append(len(datas))
            offsets.append(offset)
            lengths.append(n)
            ledger.placed += len(datas)
            parts.append(framed)
            offset += n
        groups.datas = None  # the entries are framed: no need to keep them until the receipts
        blob = b"".join(parts)
        began = time.monotonic()
        key = await self._put(self._next_key(), blob, groups)
        put_done = time.monotonic()
        self.timings.observe("put", put_done - began)
        if key is not None and self.kept is not None:
            try:
                self.kept.wrote(key, blob)  # the keeper's copy (on disk: .spilled_sections)
            except Exception:  # it keeps less; the commit goes on
                log.exception("keeping commit object %s for compaction failed", key)
        # Transactions in commit order: ours goes once the previous one is
        # sent (chained on it: ``after``) or every earlier commit ended.
        after = await follow(previous)
        txn_began = time.monotonic()
        self.timings.observe("wait", txn_began - put_done)
        if key is None:
            return
        chained = after is not None
        per_ledger, writers = groups.split(key, chained=chained)
        committed = None
        if not per_ledger and len(writers) == 1:  # the usual case: one record, maybe chained
            writer, ids, rows = next(iter(writers.values()))
            if can_chain(writer, ids, RECORD_LEDGERS) and time.monotonic() - began <= MAX_COMMIT_AGE_S:
                version = writer.version
                if chained:
                    self.chained += 1
                try:
                    if await chained_record(self.store, writer, key, rows, after, previous, link,
                                            self._count_transaction):
                        self.chain_resends += 1
                    committed = ids
                except TransactionFailed as exc:  # a ledger fenced, or the one before did not land
                    link.tell_answered(False)
                    if chained:
                        self.chain_retries += 1
                    stale = version == writer.version and any(k.startswith(WRITERS) for k in exc.keys)
                    if after is not None:
                        await asyncio.shield(previous.ended)
                        after = None
                    if stale:  # no one read the fence since: learn who was fenced before going again
                        try:
                            await writer.refresh(self.store)
                        except MetadataError:  # the unchained try fails its compare and reads it again
                            pass
                except (MetadataError, ValueError) as exc:
                    link.tell_answered(False)  # unknown: a commit chained on it falls back
                    error = StorageError(f"committing object {key} failed: {exc}")
                    log.error("%s", error)
                    for lid in ids:
                        groups.fail(lid, error)
                    committed = []
        if committed is None:  # unchained: after every earlier commit, as it always was
            link.tell_sent(None)
            link.tell_answered(False)
            if after is not None:
                await asyncio.shield(previous.ended)
                after = None
            if chained:
                per_ledger, writers = groups.split(key, chained=False)
            jobs = [self._record(per_ledger[i:i + LEDGERS_PER_TRANSACTION], groups, key, began)
                    for i in range(0, len(per_ledger), LEDGERS_PER_TRANSACTION)]
            jobs += [self._record_v2(writer, ids, rows, groups, key, began) for writer, ids, rows in writers.values()]
            if not jobs:
                committed = []
            elif len(jobs) == 1:
                committed = await jobs[0]
            else:  # jobs name disjoint ledgers: their transactions may run at once
                committed = [lid for done in await asyncio.gather(*jobs) for lid in done]
        if after is not None:  # receipts in commit order
            await asyncio.shield(previous.ended)
        txn_done = time.monotonic()
        self.timings.observe("transaction", txn_done - txn_began)
        # The receipts: one flat pass over the ledgers committed (no call per
        # ledger but its batches' own callbacks: this runs for every ledger
        # of every commit, thousands per commit at 10,000 written topics).
        kept = self.kept
        add_kept = kept.add if kept is not None and kept.per_section else None
        index, all_ledgers, heads, more_of = groups.index, groups.ledgers, groups.heads, groups.more
        for lid in committed:
            g = index[lid]
            ledger = all_ledgers[g]
            if after is not None and ledger.error is not None:  # an earlier commit's outcome was unknown
                groups.tell(g, ledger.error)
                continue
            # ledger._committed(section) inlined
            first, count, length = firsts[g], counts[g], lengths[g]
            held = ledger.sections
            held.add(first, count, key, offsets[g], length)  # columns: nothing the collector counts
            ledger.entry_count = first + count
            ledger.size += length
            if len(held) >= ledger.prepare_at:  # below it, neither changes
                ledger.update_fullness()
            if add_kept is not None:
                add_kept(lid, parts[g])
            head = heads[g]
            callback = callbacks[head]
            if callback is not None:
                callbacks[head] = None
                try:
                    callback(None)
                except Exception:
                    log.exception("a commit's callback failed")
            more = more_of[g]
            if more is not None:
                for batch in more:
                    tell_batch(callbacks, batch, None)
        self.commits += 1
        ended = time.monotonic()
        if stamps is not None:
            stamps.update(began=began, put_done=put_done, txn_began=txn_began, txn_done=txn_done, ended=ended)
        self.timings.observe("receipts", ended - txn_done)
        self.timings.observe("total", ended - first_at)

    def _next_key(self) -> str:
        self._seq += 1
        return commit_object(self.session, int(time.time() * 1000), self._seq)

    async def _put(self, key: str, blob: bytes, groups: CommitGroups) -> str | None:
        deadline = time.monotonic() + self.put_timeout_s
        backoff = 0.02
        while True:
            try:
                await self.objects.put(key, blob, if_absent=True)
                self.puts += 1
                return key
            except ObjectStoreError as exc:
                if time.monotonic() + backoff > deadline or self._stopping:
                    error = StorageError(f"writing object {key} failed: {exc}")
                    log.error("%s", error)
                    for g, ledger in enumerate(groups.ledgers):
                        ledger.error = error  # its entry ids were spent: the next go to a new ledger
                        groups.tell(g, error)
                    return None
                log.warning("writing object %s failed, retrying: %s", key, exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
                key = self._next_key()  # the failed PUT may have landed: never reuse its key

    async def _record(self, ids: list[int], groups: CommitGroups, key: str, began: float) -> list[int]:
        """One transaction for these format-1 ledgers (their sections in
        object ``key``); fenced ones drop out and it retries. Returns the
        ledgers committed; the others' batches have failed (their ledger's
        ``error`` set)."""
        ids = list(ids)
        index, ledgers, sections = groups.index, groups.ledgers, groups.sections
        while ids:
            if time.monotonic() - began > MAX_COMMIT_AGE_S:  # e.g. the process was paused in between
                error = StorageError(f"object {key} is too old to commit")
                for lid in ids:
                    groups.fail(lid, error)
                return []
            # Only what the fence needs: each ledger's epoch compared, its
            # section recorded; no read-backs (``versions=False``).
            compares = [Compare(ledger_key(lid), ledgers[index[lid]].epoch) for lid in ids]
            writes = [Put(section_key(lid, sections[index[lid]].first), sections[index[lid]].encode()) for lid in ids]
            try:
                self.transactions += 1
                await self.store.transaction(compares, writes, versions=False)
            except TransactionFailed as exc:
                lost = {k for k in exc.keys}
                for lid in [lid for lid in ids if ledger_key(lid) in lost]:
                    log.warning("ledger %d was fenced by a new owner: its commit is refused", lid)
                    groups.fail(lid, ManagedLedgerFencedError(f"ledger {lid} was fenced by a new owner"))
                ids = [lid for lid in ids if ledger_key(lid) not in lost]
                continue
            except (MetadataError, ValueError) as exc:
                error = StorageError(f"committing object {key} failed: {exc}")
                log.error("%s", error)
                for lid in ids:
                    groups.fail(lid, error)
                return []
            return ids
        return []

    async def _record_v2(self, writer, ids: list[int], rows: list[bytes], groups: CommitGroups, key: str,
                         began: float) -> list[int]:
        """Format-2 ledgers ``ids`` of ``writer`` (``rows``: their sections in
        object ``key``, :func:`~.commit_records.encode_row`): one commit
        record under its fence. Returns the ledgers committed; the others'
        batches have failed."""
        def fail(lids, error: StorageError) -> None:
            for lid in lids:
                groups.fail(lid, error)

        if time.monotonic() - began > MAX_COMMIT_AGE_S:  # e.g. the process was paused in between
            fail(ids, StorageError(f"object {key} is too old to commit"))
            return []
        try:
            committed, fenced = await record_rows(self.store, writer, key, ids, rows, self._count_transaction)
        except (MetadataError, ValueError) as exc:
            error = StorageError(f"committing object {key} failed: {exc}")
            log.error("%s", error)
            fail(ids, error)
            return []
        for lid in fenced:
            fail([lid], ManagedLedgerFencedError(f"ledger {lid} was fenced by a new owner"))
        if fenced:
            log.warning("%d ledgers were fenced by new owners (or their writer's session ended): "
                        "their commits are refused", len(fenced))
        return committed

    def _count_transaction(self) -> None:
        self.transactions += 1
