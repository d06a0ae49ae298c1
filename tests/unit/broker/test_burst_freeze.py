"""BurstFreeze (``broker/server/burst_freeze.py``) with the real collector:
frozen after a burst of loads and a quiet spell, not before; unfrozen by
the death of something born before the freeze (so its cycles are freed),
not by one born after."""
from __future__ import annotations

import asyncio
import gc
import weakref

from magnetar.broker.server.burst_freeze import BurstFreeze

from tests.helpers import wait_until


class Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_a_burst_is_frozen_once_quiet_and_a_death_before_it_unfreezes():
    loop = asyncio.get_running_loop()
    freezer = BurstFreeze(loop, min_loads=3, quiet_s=0.05)
    try:
        before = Cycle()
        born = [freezer.loaded() for _ in range(3)]
        assert born == [0, 0, 0] and not freezer.frozen  # still loading
        await wait_until(lambda: freezer.frozen, what="frozen after the quiet spell")
        assert gc.get_freeze_count() > 0 and freezer.epoch == 1
        assert not any(o is before for o in gc.get_objects())  # out of the collector's sight

        freezer.died(freezer.born())  # born after the freeze: nothing of it is frozen
        assert freezer.frozen and freezer.unfreezes == 0

        gone = weakref.ref(before)
        del before  # a cycle: only the collector frees it, and only unfrozen
        gc.collect()
        assert gone() is not None
        freezer.died(born[0])
        assert not freezer.frozen and gc.get_freeze_count() == 0 and freezer.unfreezes == 1
        gc.collect()
        assert gone() is None
    finally:
        freezer.cancel()
        gc.unfreeze()


async def test_fewer_loads_than_a_burst_freeze_nothing():
    freezer = BurstFreeze(asyncio.get_running_loop(), min_loads=3, quiet_s=0.02)
    try:
        freezer.loaded()
        freezer.loaded()
        await asyncio.sleep(0.1)
        assert not freezer.frozen and freezer.freezes == 0
        freezer.died(0)
        assert freezer.unfreezes == 0
    finally:
        freezer.cancel()
        gc.unfreeze()
