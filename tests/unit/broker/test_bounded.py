"""each_bounded: every item runs, at most ``limit`` at a time, together
rather than one after another, and one failure does not stop the rest."""
from __future__ import annotations

import asyncio
import logging

from magnetar.broker.bounded import each_bounded


async def test_items_run_together_up_to_the_limit_and_failures_are_counted():
    running = peak = 0
    done = []

    async def action(i: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        if i == 3:
            raise OSError("disk")
        done.append(i)

    failed = await each_bounded(range(40), action, 8, logging.getLogger("test"), "closing")
    assert failed == 1 and sorted(done) == [i for i in range(40) if i != 3]
    assert peak == 8
