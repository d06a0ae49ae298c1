"""Group commit: one writer thread per factory writes every ledger.

The event loop never touches a segment file for writing. It hands batches of
entries to :meth:`GroupCommitWriter.submit_write` and gets a callback on the
loop when they are durable under the sync policy. The writer works in rounds:
it takes everything queued, writes each ledger's batches with one write()
(all the round's ledgers in one call: :mod:`.segment_writes`),
then makes the round durable (policy ``"always"``: one journal fdatasync),
then posts the round's completions to the loop with a single
``call_soon_threadsafe``. Whatever arrives while a round's fsync runs is
written and synced together in the next round: that is the group commit,
and why one fsync covers many appends under concurrency.

Ordering: items run in submission order; a ledger's batches complete in
submission order. :meth:`call` runs a function (create, seal...) on the
writer thread after everything submitted before it, so e.g. a seal sees all
earlier writes.

How a round becomes durable is a collaborator's (:mod:`.durability`): one
journal append and one fdatasync (:mod:`.journal_sync`, the default), or an
fdatasync of each segment file (:class:`~.durability.SegmentSync`, what a
writer built without one uses).

Fencing: after the round is durable and before its completions, the
writer asks ``taken_over`` about the ledgers it wrote, in one call (the
file backend: is there a new owner's fence marker?); a ledger taken over
gets that error for its batches instead of a completion, so no receipt
follows.

Failures: a batch whose write or sync fails completes with a
``StorageError``; the ledger is rolled back to what is known durable and
fenced, so every later batch for it fails with ``LedgerFencedError`` and no
entry is ever reported durable after a failed one in the same ledger.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

from ..errors import StorageError
from .direct_io import DirectWriter
from .durability import Durability, SegmentSync, Written
from .ledger import Ledger, PreparedWrite
from .segment_writes import write_segments

log = logging.getLogger(__name__)

WriteCallback = Callable[[BaseException | None], None]


class _Write:
    __slots__ = ("ledger", "datas", "callback", "loop")

    def __init__(self, ledger: Ledger, datas: list[bytes], callback: WriteCallback, loop) -> None:
        self.ledger = ledger
        self.datas = datas
        self.callback = callback
        self.loop = loop


class _Call:
    __slots__ = ("fn", "args", "future", "loop")

    def __init__(self, fn, args, future, loop) -> None:
        self.fn = fn
        self.args = args
        self.future = future
        self.loop = loop


class GroupCommitWriter:
    """The writer thread. Counters (``fsync_count``, ``write_count``,
    ``round_count``, ``entries_written``) are for tests and stats."""

    def __init__(self, sync_policy: str = "always", sync_interval_ms: float = 100, *, name: str = "magnetar-writer",
                 durability: Durability | None = None,
                 taken_over: Callable[[list[Ledger]], dict[Ledger, BaseException]] | None = None,
                 direct_writer: DirectWriter | None = None):
        #: Makes each round's writes durable (the sync policy's meaning).
        self.durability = durability or SegmentSync(sync_policy, sync_interval_ms, name=name)
        #: After the round is durable and before any completion, given the
        #: ledgers it wrote: the error that refuses each one a new owner took
        #: (the fence marker). Here, once per round for the ledgers it wrote
        #: (one call, :func:`.round_io.exist`), so the event loop makes no
        #: check (a stat) per batch.
        self._taken_over = taken_over
        self.sync_policy = self.durability.sync_policy
        #: Writes the ledgers the durability syncs in place with O_DIRECT
        #: (:mod:`.direct_io`); None: all through the page cache.
        self.direct_writer = direct_writer
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Write | _Call] = []
        self._stopping = False
        self._abandoned = False
        self.write_count = 0
        self.round_count = 0
        self.entries_written = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def fsync_count(self) -> int:
        return self.durability.fsync_count

    # ------------------------------------------------------------ loop side

    def submit_write(self, ledger: Ledger, datas: list[bytes], callback: WriteCallback, loop) -> None:
        """Queue ``datas`` for ``ledger``; ``callback(None)`` or ``callback(error)``
        runs on ``loop`` once they are durable (or failed). Never blocks on I/O."""
        item = _Write(ledger, datas, callback, loop)
        with self._cond:
            if self._stopping:
                raise StorageError("storage writer is stopped")
            self._queue.append(item)
            if len(self._queue) == 1:
                self._cond.notify()

    def submit_writes(self, writes: list[tuple], loop) -> None:
        """:meth:`submit_write` for each ``(ledger, datas, nbytes, callback)``
        of ``writes``, under one hold of the lock; raises ``StorageError``,
        having queued none, once stopping."""
        items = [_Write(ledger, datas, callback, loop) for ledger, datas, _, callback in writes]
        with self._cond:
            if self._stopping:
                raise StorageError("storage writer is stopped")
            idle = not self._queue
            self._queue.extend(items)
            if idle and items:
                self._cond.notify()

    def call(self, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """Run ``fn(*args)`` on the writer thread after all earlier submissions;
        the returned future (of the running loop) gets its result or exception."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._cond:
            if self._stopping:
                raise StorageError("storage writer is stopped")
            self._queue.append(_Call(fn, args, future, loop))
            self._cond.notify()
        return future

    async def close(self) -> None:
        """Finish everything queued (with its final syncs), then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        await asyncio.to_thread(self._thread.join)
        await asyncio.to_thread(self.durability.close)
        if self.direct_writer is not None:
            self.direct_writer.close()

    def abandon(self) -> None:
        """Stop at once, dropping queued work without completing it: what a
        crash does. For tests that simulate ``kill -9``."""
        with self._cond:
            self._stopping = True
            self._abandoned = True
            self._queue.clear()
            self._cond.notify()
        self._thread.join()
        self.durability.abandon()
        if self.direct_writer is not None:
            self.direct_writer.close()

    # ---------------------------------------------------------- writer side

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._queue and not self._stopping:
                    cond.wait()
                items = self._queue
                self._queue = []
                stopping = self._stopping
                if self._abandoned:
                    return
            if items:
                try:
                    self._process(items)
                except BaseException as exc:  # a bug here must not strand the futures
                    log.exception("storage writer round failed")
                    self._fail_all(items, exc)
            if stopping and not items:
                return

    def _process(self, items: list[_Write | _Call]) -> None:
        self.round_count += 1
        done: list[tuple[Any, Callable, tuple]] = []
        writes: list[_Write] = []
        for item in items:
            if type(item) is _Write:
                writes.append(item)
                continue
            if writes:
                self._flush(writes, done)
                writes = []
            self._post(done)
            done = []
            try:
                result = item.fn(*item.args)
            except BaseException as exc:
                done.append((item.loop, _resolve, (item.future, None, exc)))
            else:
                done.append((item.loop, _resolve, (item.future, result, None)))
        if writes:
            self._flush(writes, done)
        self._post(done)

    def _flush(self, writes: list[_Write], done: list) -> None:
        groups: dict[Ledger, list[_Write]] = {}
        for w in writes:
            group = groups.get(w.ledger)
            if group is None:
                groups[w.ledger] = [w]
            else:
                group.append(w)
        errors: dict[Ledger, BaseException] = {}
        written: list[Written] = []
        prepared: list[tuple[Ledger, int, PreparedWrite, int]] = []
        for ledger, group in groups.items():
            datas = group[0].datas
            if len(group) > 1:
                datas = [d for w in group for d in w.datas]
            try:
                prepared.append((ledger, ledger.entry_count, ledger.prepare_write(datas), len(datas)))
            except BaseException as exc:
                errors[ledger] = exc
        direct: frozenset[int] = frozenset()
        if self.direct_writer is not None and self.direct_writer.enabled:
            direct = self.durability.in_place([len(p[2].buf) for p in prepared])
        for (ledger, before, write, count), error in zip(prepared,
                                                         write_segments(prepared, direct, self.direct_writer)):
            if error is not None:
                errors[ledger] = error
                continue
            written.append((ledger, before, write.buf))
            self.write_count += 1
            self.entries_written += count
        try:
            failed = self.durability.made_durable(written)
        except BaseException as exc:  # a bug there must not receipt the round
            log.exception("storage durability step failed")
            failed = {w[0]: exc for w in written}
        for ledger, before, _ in written:
            if ledger in failed:
                ledger.rollback_to(before)
                errors[ledger] = failed[ledger]
        if self._taken_over is not None:
            # Not rolled back: the file is the new owner's now.
            errors.update(self._taken_over([w[0] for w in written if w[0] not in failed]))
        for ledger, group in groups.items():
            error = errors.get(ledger)
            for w in group:
                done.append((w.loop, w.callback, (error,)))

    def _post(self, done: list) -> None:
        if not done:
            return
        by_loop: dict[Any, list] = {}
        for loop, fn, args in done:
            by_loop.setdefault(loop, []).append((fn, args))
        for loop, calls in by_loop.items():
            try:
                loop.call_soon_threadsafe(_run_calls, calls)
            except RuntimeError:
                pass  # the loop is closed: nobody is waiting any more

    def _fail_all(self, items: list, exc: BaseException) -> None:
        error = StorageError(f"storage writer failed: {exc!r}")
        done = []
        for item in items:
            if type(item) is _Write:
                item.ledger.fence()
                done.append((item.loop, item.callback, (error,)))
            else:
                done.append((item.loop, _resolve, (item.future, None, error)))
        self._post(done)


def _resolve(future: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)


def _run_calls(calls: list) -> None:
    for fn, args in calls:
        try:
            fn(*args)
        except Exception:
            log.exception("storage completion callback failed")

