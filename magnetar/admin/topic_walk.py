"""Visiting every loaded topic in slices of bounded time, the event loop running between.

A scrape of ``/metrics`` (and the console's listings) reads something of
every loaded topic. At 10,000 written topics one pass over them costs the
event loop tens of ms, and traffic waits that long: the stall landed in
the publish p99.x of every scrape. :func:`visit_in_slices` does the same
pass with the loop running between slices of at most about
:data:`SLICE_S` of work, so a scrape delays traffic by one slice at a
time, whatever the number of topics; and when the loop has traffic to
serve, it rests between two slices (:func:`rest`), so a scrape takes at
most about a quarter of the loop's thread: a broker near its capacity
has no half of it to give, and the queue a scrape builds is publish
latency.

What a pass sees: the topics loaded when it started (a topic unloaded
meanwhile is still read, its objects stay valid; one loaded meanwhile is
seen at the next pass), each read at its own moment, not one instant.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Iterable

#: The work (seconds) one slice may take before the pass yields to the event loop.
SLICE_S = 0.002
#: Items visited between two looks at the clock (a look costs about as much as a cheap visit).
CHECK_EVERY = 16
#: After a slice, when the event loop had other work waiting, a pass rests
#: this many times the slice's time (at most :data:`SLICE_S`'s) before the
#: next: on a busy broker it takes at most a quarter of the loop's thread
#: while it runs. The traffic of a broker near its capacity cannot give a
#: scrape half the loop: the queue that builds up while the scrape runs
#: was the publish p99 of scraped minutes (bench/scrape_stalls.py).
PAUSE_RATIO = 3.0
#: Other work the loop did in one turn above which it counts as busy.
BUSY_TURN_S = 0.0002


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
    how many slices it took. An exception from ``visit`` ends the pass."""
    budget = SLICE_S if slice_s is None else slice_s
    clock = time.perf_counter
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


class Families:
    """Metric families already built, for ``prometheus_client.generate_latest``
    (which only calls ``collect``)."""

    def __init__(self, families: list) -> None:
        self.families = families

    def collect(self):
        return iter(self.families)
