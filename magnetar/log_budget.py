"""A log line that repeats per request, written at a bounded rate.

Some failures arrive once per request: while etcd stalls, every ack whose
cursor write fails is refused, thousands in a second, and one INFO line each
buries the log that an operator reads to find the stall. A ``LogBudget``
writes the first ``burst`` lines of a kind in each ``window`` seconds, then
counts the rest and reports the count with the next line written.

Contract: ``log`` never raises and never blocks; a kind that stays quiet for
a window starts with a full burst again. Not thread-safe (one event loop).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogBudget:
    """Writes at most ``burst`` lines per ``window`` seconds for each kind."""

    def __init__(self, logger: logging.Logger, *, burst: int = 5, window: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if burst < 1 or window <= 0:
            raise ValueError(f"a log budget needs burst >= 1 and window > 0; got {burst} and {window}")
        self._logger = logger
        self._burst = burst
        self._window = window
        self._clock = clock
        # kind -> [window start, lines written in it, lines dropped since the last one written]
        self._kinds: dict[str, list] = {}

    def log(self, level: int, kind: str, msg: str, *args: object) -> None:
        """Writes ``msg % args`` at ``level`` unless ``kind`` spent its burst."""
        if not self._logger.isEnabledFor(level):
            return
        now = self._clock()
        state = self._kinds.get(kind)
        if state is None or now - state[0] >= self._window:
            dropped = state[2] if state is not None else 0
            state = self._kinds[kind] = [now, 0, dropped]
        if state[1] >= self._burst:
            state[2] += 1
            return
        state[1] += 1
        if state[2]:
            msg = f"{msg} (and {state[2]} more like it not logged)"
            state[2] = 0
        self._logger.log(level, msg, *args)

    def dropped(self, kind: str) -> int:
        """Lines of ``kind`` counted but not yet reported."""
        state = self._kinds.get(kind)
        return state[2] if state is not None else 0
