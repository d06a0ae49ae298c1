"""Group commit: one writer thread per factory writes and syncs every ledger.

The event loop never touches a segment file for writing. It hands batches of
entries to :meth:`GroupCommitWriter.submit_write` and gets a callback on the
loop when they are durable under the sync policy. The writer works in rounds:
it takes everything queued, writes each ledger's batches with one write(),
then (policy ``"always"``) fdatasyncs each ledger it touched once, then posts
the round's completions to the loop with a single ``call_soon_threadsafe``.
Whatever arrives while a round's fsync runs is written and synced together
in the next round: that is the group commit, and why one fsync covers many
appends under concurrency.

Ordering: items run in submission order; a ledger's batches complete in
submission order. :meth:`call` runs a function (create, seal...) on the
writer thread after everything submitted before it, so e.g. a seal sees all
earlier writes.

Failures: a batch whose write or fsync fails completes with a
``StorageError``; the ledger is rolled back to what is known durable and
fenced, so every later batch for it fails with ``LedgerFencedError`` and no
entry is ever reported durable after a failed one in the same ledger. With
policy ``"interval"`` a failed periodic fsync fences the ledger (entries
already completed cannot be retracted: that is the policy's trade-off).

Policy ``"interval"`` syncs on a second thread (the syncer): an fdatasync
can take milliseconds, and on the writer thread it would hold up every
append queued behind it, which is what the policy exists to avoid. The
syncer pins a ledger's file (the ledger's reader count) while it syncs, so a
concurrent seal or close never pulls the descriptor from under it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, Callable

from ..errors import StorageError
from .ledger import Ledger

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

    def __init__(self, sync_policy: str = "always", sync_interval_ms: float = 100, *, name: str = "magnetar-writer"):
        if sync_policy not in ("always", "interval", "never"):
            raise ValueError(f"unknown sync policy {sync_policy!r}")
        self.sync_policy = sync_policy
        self._interval = sync_interval_ms / 1000
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Write | _Call] = []
        self._stopping = False
        self._abandoned = False
        self._unsynced: set[Ledger] = set()  # interval policy: written since the last fsync
        self._unsynced_lock = threading.Lock()
        self._syncer_stop = threading.Event()
        self.fsync_count = 0
        self.write_count = 0
        self.round_count = 0
        self.entries_written = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._syncer: threading.Thread | None = None
        if sync_policy == "interval":
            self._syncer = threading.Thread(target=self._sync_periodically, name=f"{name}-syncer", daemon=True)
            self._syncer.start()

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
        await asyncio.to_thread(self._stop_syncer)
        self._sync_unsynced()  # the last writes, now that both threads are gone

    def abandon(self) -> None:
        """Stop at once, dropping queued work without completing it: what a
        crash does. For tests that simulate ``kill -9``."""
        with self._cond:
            self._stopping = True
            self._abandoned = True
            self._queue.clear()
            self._cond.notify()
        self._thread.join()
        self._stop_syncer()

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
        before: dict[Ledger, int] = {}
        for ledger, group in groups.items():
            before[ledger] = ledger.entry_count
            datas = group[0].datas
            if len(group) > 1:
                datas = [d for w in group for d in w.datas]
            try:
                ledger.write_entries(datas)
            except BaseException as exc:
                errors[ledger] = exc
                continue
            self.write_count += 1
            self.entries_written += len(datas)
        if self.sync_policy == "always":
            for ledger in groups:
                if ledger in errors:
                    continue
                try:
                    ledger.sync()
                    self.fsync_count += 1
                except BaseException as exc:
                    ledger.rollback_to(before[ledger])
                    errors[ledger] = exc
        elif self.sync_policy == "interval":
            with self._unsynced_lock:
                self._unsynced.update(ledger for ledger in groups if ledger not in errors)
        for ledger, group in groups.items():
            error = errors.get(ledger)
            for w in group:
                done.append((w.loop, w.callback, (error,)))

    # ---------------------------------------------------------- syncer side

    def _sync_periodically(self) -> None:
        while not self._syncer_stop.wait(self._interval):
            self._sync_unsynced()

    def _stop_syncer(self) -> None:
        if self._syncer is not None:
            self._syncer_stop.set()
            self._syncer.join()

    def _sync_unsynced(self) -> None:
        with self._unsynced_lock:
            pending, self._unsynced = self._unsynced, set()
        for ledger in pending:
            try:
                synced = ledger.sync_if_open()
            except StorageError as exc:
                # The disk refused (EIO): expected of a failing disk, so one
                # line, not a traceback per ledger per period.
                log.error("periodic fsync of ledger %d failed; fencing it: %s", ledger.ledger_id, exc)
                ledger.fence()
                continue
            except BaseException:
                log.exception("periodic fsync of ledger %d failed; fencing it", ledger.ledger_id)
                ledger.fence()
                continue
            if synced:
                self.fsync_count += 1

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

