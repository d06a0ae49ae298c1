"""The periodic sweep: one round over the loaded topics every few seconds.

Message expiry, backlog quotas and inactive topics each run a round on a
timer. :func:`sweep_periodically` is that timer for all three: it sleeps
``interval_s``, runs ``one_round()``, and goes on until cancelled; a round
that fails is logged (``what`` names it) and the next one still runs.
:func:`start_sweep` and :func:`stop_sweep` hold it in a task.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

log = logging.getLogger(__name__)


async def sweep_periodically(interval_s: float, one_round: Callable[[], Awaitable[Any]], what: str) -> None:
    """``one_round()`` every ``interval_s`` seconds, until cancelled."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await one_round()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s round failed", what)


def start_sweep(interval_s: float, one_round: Callable[[], Awaitable[Any]], what: str) -> asyncio.Task:
    """:func:`sweep_periodically` in a task named after ``what``."""
    return asyncio.get_running_loop().create_task(sweep_periodically(interval_s, one_round, what), name=what)


async def stop_sweep(task: asyncio.Task | None) -> None:
    """Cancel the sweep and wait for it to end (None: nothing to stop)."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
