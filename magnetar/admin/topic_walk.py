"""Visiting every loaded topic in slices of bounded time, the event loop running between.

A scrape of ``/metrics`` (and the console's listings) reads something of
every loaded topic. At 10,000 written topics one pass over them costs the
event loop tens of ms, and traffic waits that long: the stall landed in
the publish p99.x of every scrape. :func:`visit_in_slices` does the same
pass with the loop running between slices of at most about
:data:`SLICE_S` of work, so a scrape delays traffic by one slice at a
time, whatever the number of topics.

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


async def visit_in_slices(items: Iterable[Any], visit: Callable[[Any], object], slice_s: float | None = None) -> int:
    """Call ``visit(item)`` for each of ``items``, yielding to the event loop
    whenever a slice has run ``slice_s`` (default :data:`SLICE_S`); returns
    how many slices it took. An exception from ``visit`` ends the pass."""
    budget = SLICE_S if slice_s is None else slice_s
    clock = time.perf_counter
    deadline = clock() + budget
    slices = 1
    countdown = CHECK_EVERY
    for item in items:
        if not countdown:
            countdown = CHECK_EVERY
            if clock() >= deadline:
                await asyncio.sleep(0)
                slices += 1
                deadline = clock() + budget
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
