"""Who hears about an append: a future, or a plain callback.

``ManagedLedger.append`` hands back an ``asyncio.Future`` of the entry's
:class:`~.position.Position`: the convenient form for code that awaits.
``ManagedLedger.append_then`` takes a callback instead, for the broker's
per-entry publish path: a future costs an object, a done-callback and a turn
of the event loop (``set_result`` schedules its callbacks with ``call_soon``)
per entry, and that was a fifth of the broker's CPU per unbatched entry.

Callback contract (``OnStored``): appends that gave the same callback object
one after the other form a *run*; the callback hears about each run once,
so a topic whose entries share one group commit is told once, not once per
entry. It is called on the event loop, for every accepted append
(``append_then`` returned) that is not abandoned, as
``on_stored(ledger_id, first_entry_id, count, None)`` once the run's
``count`` entries are durable at ``first_entry_id .. first_entry_id + count - 1``
of ``ledger_id``, or ``on_stored(-1, -1, count, error)`` with a
``StorageError`` when they are not. Every accepted append is counted exactly
once, in append order, synchronously from the managed ledger's completion
path (a run may come in several calls: one per group commit). It must not
raise (what it raises is logged and dropped) and must not call back into
the managed ledger's append path expecting the completion to be over: defer
that with ``call_soon``. A managed ledger abandoned as a crash would
(``_abandon``) cancels futures and calls no callback, as a crash tells nobody.
"""
from __future__ import annotations

import asyncio
import logging
from itertools import groupby
from typing import Callable, Union

from .position import Position

log = logging.getLogger(__name__)

OnStored = Callable[[int, int, int, "BaseException | None"], None]
Waiter = Union[asyncio.Future, OnStored]

_Future = asyncio.Future


def is_pending(waiter: Waiter) -> bool:
    """Whether the append still wants its entry (a cancelled future does not)."""
    return not (waiter.__class__ is _Future and waiter.done())


def complete(waiters: list, ledger_id: int, first_entry_id: int) -> None:
    """The entries ``first_entry_id ..`` of ``ledger_id`` are durable: tell their waiters, in order."""
    entry_id = first_entry_id
    # groupby and list run in C: a run of one topic's entries costs one call.
    for waiter, run in groupby(waiters):
        count = len(list(run))
        if waiter.__class__ is _Future:  # a future is its own run, one entry long
            if not waiter.done():
                waiter.set_result(Position(ledger_id, entry_id))
        else:
            try:
                waiter(ledger_id, entry_id, count, None)
            except Exception:  # a listener's bug must not stop the others' receipts
                log.exception("an append's callback failed on %d:%d (+%d)", ledger_id, entry_id, count)
        entry_id += count


def fail(waiters, error: BaseException) -> None:
    """Tell each waiter its entries are not stored, in order."""
    for waiter, run in groupby(waiters):
        count = len(list(run))
        if waiter.__class__ is _Future:
            if not waiter.done():
                waiter.set_exception(error)
            continue
        try:
            waiter(-1, -1, count, error)
        except Exception:
            log.exception("an append's callback failed on an error (%s)", error)


def abandon(waiters) -> None:
    """Stop as a crash would: futures are cancelled, callbacks hear nothing."""
    for waiter in waiters:
        if waiter.__class__ is _Future:
            waiter.cancel()
