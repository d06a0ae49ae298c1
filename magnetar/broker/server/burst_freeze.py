"""Topics loaded in a burst, moved out of the garbage collector's sight.

The broker freezes what start-up built (``server.serve``: a full collection,
then ``gc.freeze()``). Topics and producers come later, and a burst of them
(a restart's or a failover's clients, a bundle moving here: 10,000 topics is
about a million tracked objects, some 100 per topic with its producer and
ledger) sits in the young and middle generations until middle collections
have promoted it: the first middle collections after the burst walk all of
it (120-150 ms at 10,000 topics, collecting nothing), while the topics are
being written. :class:`BurstFreeze` freezes once a burst is over: at least
``min_loads`` topics loaded since the last freeze, then ``quiet_s`` without
a load. ``gc.freeze()`` moves every tracked object to the permanent
generation in constant time (no pause, no collection).

The price, and why it is bounded: a frozen object is never examined by the
cycle collector, so a cycle of frozen objects that becomes garbage is not
freed while frozen. A topic is such a cycle (it holds bound methods of
itself), and so is a client connection. So the first death of a topic or a
connection that was alive at a freeze (:meth:`died`, given the epoch it was
born in) unfreezes everything (``gc.unfreeze()``, constant time too): the
frozen objects join the oldest generation, where the next full collection
frees what died, as it would have without the freeze. What else was alive
at a freeze and dies in a cycle before the next unfreeze (a consumer closed
on a live connection, an admin HTTP connection) waits for that unfreeze.
Garbage cycles that already existed at the freeze are frozen too: the
broker's middle collections find none under load (0 objects collected),
and they too are released at the next unfreeze. Unfreezing also returns
start-up's objects to the oldest generation: a full collection (every 100
middle ones with the broker's thresholds) walks them again, as it did
before start-up's freeze existed.
"""
from __future__ import annotations

import asyncio
import gc
import logging
from typing import Callable

log = logging.getLogger(__name__)

#: Topic loads that make a burst worth freezing (fewer: their objects are few).
MIN_LOADS = 1000
#: Seconds without a topic load that end a burst.
QUIET_S = 1.0


class BurstFreeze:
    """Freezes after a burst of topic loads; unfreezes when something frozen
    that lives in cycles (a topic, a connection) dies. See the module
    docstring. ``freeze``/``unfreeze`` default to the collector's own."""

    def __init__(self, loop: asyncio.AbstractEventLoop, min_loads: int = MIN_LOADS, quiet_s: float = QUIET_S,
                 freeze: Callable[[], None] = gc.freeze, unfreeze: Callable[[], None] = gc.unfreeze) -> None:
        self._loop = loop
        self.min_loads = min_loads
        self.quiet_s = quiet_s
        self._freeze = freeze
        self._unfreeze = unfreeze
        #: Bumped at each freeze: what was born in an earlier epoch may be frozen.
        self.epoch = 0
        #: Whether objects are frozen by this (since the last unfreeze).
        self.frozen = False
        #: Freezes and unfreezes done (for the log and the tests).
        self.freezes = self.unfreezes = 0
        self._loads = 0
        self._last_load = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def loaded(self) -> int:
        """A topic was loaded; returns the epoch it is born in (for :meth:`died`)."""
        self._loads += 1
        self._last_load = self._loop.time()
        if self._timer is None and self._loads >= self.min_loads:
            self._timer = self._loop.call_later(self.quiet_s, self._check)
        return self.epoch

    def born(self) -> int:
        """The epoch something other than a topic load (a connection) is born in."""
        return self.epoch

    def died(self, born: int) -> None:
        """Something living in cycles, born in epoch ``born``, is gone: if it
        may be frozen, unfreeze, so the collector can free it."""
        if self.frozen and born < self.epoch:
            self._unfreeze()
            self.frozen = False
            self.unfreezes += 1

    def _check(self) -> None:
        self._timer = None
        wait = self._last_load + self.quiet_s - self._loop.time()
        if wait > 0:  # still loading
            self._timer = self._loop.call_later(wait, self._check)
            return
        loads, self._loads = self._loads, 0
        self._freeze()
        self.epoch += 1
        self.frozen = True
        self.freezes += 1
        # Not gc.get_freeze_count(): it walks the frozen list (a million objects here).
        log.info("froze the collector's generations after a burst of %d topic loads", loads)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
