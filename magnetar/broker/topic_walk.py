"""Passes over every loaded topic, a slice of bounded time at a time, taking
a bounded share of a busy event loop.

A broker reads something of every loaded topic on a timer or on request:
the stats round (``stats_update_frequency_s``), the load report
(``load_balancer_report_interval_s``), a scrape of ``/metrics``, the
console's listings. At 10,000 written topics each pass is tens of ms of
work, and the traffic of a broker near its capacity queues behind it: with
a scrape every 5 s, a load report every 5 s and the stats round every 10 s,
a 20 s sending of 10,000 topics at 20,000 msg/s had a publish p99 of 105-112
ms, 69 ms with none of them (docs/object-storage.md, "Passes over every
topic").

:func:`visit_in_slices` runs such a pass with the loop running between
slices of at most about :data:`SLICE_S` of work, so traffic waits at most
one slice; and when the loop has traffic to serve it rests between two
slices (:func:`rest`), so the pass takes at most :data:`SHARE` of the
loop's thread. The passes of one loop take turns (one at a time), so
together they take no more than one does. (A scrape's per-topic text,
written after its pass with :func:`rest` between chunks, is paced the
same way but not in turn: it is yielded to the client chunk by chunk,
and a gate held across those yields would wait on the client.) An idle
broker is not slowed: without other work in a turn there is no rest.

What a pass sees: the topics loaded when it started (a topic unloaded
meanwhile is still read, its objects stay valid; one loaded meanwhile is
seen at the next pass), each read at its own moment, not one instant.
Failure modes: an exception from ``visit`` ends the pass (and lets the
next one go).
"""
from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any, Callable, Iterable

#: The work (seconds) one slice may take before the pass yields to the event loop.
SLICE_S = 0.002
#: Items visited between two looks at the clock (a look costs about as much as a cheap visit).
CHECK_EVERY = 16
#: After a slice, when the event loop had other work waiting, a pass rests
#: this many times the slice's time (at most :data:`SLICE_S`'s) before the
#: next. At 3 (a quarter of the loop) the passes of a broker at 10,000
#: written topics still put their bursts in the publish p99; at 9 a pass
#: takes a tenth of a busy loop, and a scrape of 10,000 topics (~100 ms of
#: work) 1.5-2.6 s on a broker at 20,000 msg/s (docs/operations.md).
PAUSE_RATIO = 9.0
#: The share of a busy loop's thread the passes take, together.
SHARE = 1 / (1 + PAUSE_RATIO)
#: Other work the loop did in one turn above which it counts as busy.
BUSY_TURN_S = 0.0002

#: One gate per event loop: its passes take turns.
_gates: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]" = weakref.WeakKeyDictionary()


def _gate() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Lock()
    return gate


async def rest(worked_s: float, budget_s: float) -> None:
    """Between two slices: one turn of the event loop; when that turn had
    other work (traffic), also :data:`PAUSE_RATIO` times the slice's time
    (``worked_s``, capped at ``budget_s``). An idle broker is not slowed."""
    clock = time.perf_counter
    turn = clock()
    await asyncio.sleep(0)
    pause = min(worked_s, budget_s) * PAUSE_RATIO
    if pause > 0 and clock() - turn > BUSY_TURN_S:
        await asyncio.sleep(pause)


async def visit_in_slices(items: Iterable[Any], visit: Callable[[Any], object], slice_s: float | None = None) -> int:
    """Call ``visit(item)`` for each of ``items``, yielding to the event loop
    whenever a slice has run ``slice_s`` (default :data:`SLICE_S`); returns
    how many slices it took. Waits for the loop's other pass, if one runs,
    to end first. An exception from ``visit`` ends the pass. Not to be
    called from within a ``visit`` (the pass would wait for itself)."""
    budget = SLICE_S if slice_s is None else slice_s
    clock = time.perf_counter
    async with _gate():
        started = clock()
        deadline = started + budget
        slices = 1
        countdown = CHECK_EVERY
        for item in items:
            if not countdown:
                countdown = CHECK_EVERY
                now = clock()
                if now >= deadline:
                    await rest(now - started, budget)
                    slices += 1
                    started = clock()
                    deadline = started + budget
            countdown -= 1
            visit(item)
        return slices
