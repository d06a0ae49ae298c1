"""Fences of format-2 ledgers gathered by writer, as a group commit gathers
writes: while one writer's fence transaction is in flight, the fences asked
for its other ledgers wait and then go together (:func:`.writer_fence.fence_ledgers`).

Why: every fence of a ledger rewrites its writer's one key, so fences sent one
by one at the same time fail each other's compare and retry: a new owner
loading a dead broker's topics (clients reconnecting all at once), or a broker
unloading its bundles, asks for hundreds of fences of one writer within
milliseconds. Gathered, they cost a transaction per
:data:`~.writer_fence.FENCES_PER_TRANSACTION` ledgers instead of a number
that grows with the square of the fences (7,197 transactions for 200 at
once on a real etcd, sent one by one).

Contract: :meth:`FenceBatches.fence` returns once the ledger's record is
fenced (True) or found absent (False), as :func:`.writer_fence.fence_ledger`
does; no batch waits for a timer (the first fence of a writer goes at once).
Failure modes: the store's ``MetadataError`` reaches every fence of the batch
it failed; later batches go on. A caller cancelled while it waits leaves the
fence to happen (and its error, if any, unheard and unlogged);
:meth:`close` cancels what has not started.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from ...metadata.store import MetadataStore
from .writer_fence import fence_ledgers


class FenceBatches:
    """Fences of format-2 ledger records, one batch at a time per writer;
    ``new_record(old value)`` is each fenced record's new value (None: delete)."""

    def __init__(self, store: MetadataStore, new_record: Callable[[bytes], "bytes | None"]) -> None:
        self._store = store
        self._new_record = new_record
        self._waiting: dict[str, dict[str, list[asyncio.Future]]] = {}  # writer -> ledger key -> askers
        self._running: dict[str, asyncio.Task] = {}
        self.batches = 0  # batches sent

    async def fence(self, ledger: str, writer: str) -> bool:
        """Fence the ledger whose record is at ``ledger``, written by ``writer``."""
        done = asyncio.get_running_loop().create_future()
        # Its asker may be gone (cancelled: the shield below): a batch's
        # error is then nobody's to hear, and asyncio would log it as lost.
        done.add_done_callback(_observed)
        self._waiting.setdefault(writer, {}).setdefault(ledger, []).append(done)
        if writer not in self._running:
            self._running[writer] = asyncio.ensure_future(self._drain(writer))
        return await asyncio.shield(done)

    async def _drain(self, writer: str) -> None:
        try:
            while waiting := self._waiting.pop(writer, None):
                self.batches += 1
                try:
                    fenced = await fence_ledgers(self._store, list(waiting), writer, self._new_record)
                except asyncio.CancelledError:
                    _cancel(waiting)
                    raise
                except Exception as exc:  # MetadataError: this batch's askers hear it
                    for futures in waiting.values():
                        for future in futures:
                            if not future.done():
                                future.set_exception(exc)
                    continue
                for key, futures in waiting.items():
                    for future in futures:
                        if not future.done():
                            future.set_result(key in fenced)
        finally:
            self._running.pop(writer, None)

    async def close(self) -> None:
        """Cancel the batches under way and the fences still waiting."""
        tasks = list(self._running.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for waiting in self._waiting.values():
            _cancel(waiting)
        self._waiting.clear()


def _observed(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def _cancel(waiting: dict[str, list[asyncio.Future]]) -> None:
    for futures in waiting.values():
        for future in futures:
            future.cancel()
