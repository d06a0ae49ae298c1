"""A broker's PUT budget: at most ``rate`` commit objects a second, with
bursts of ``burst`` (a token bucket).

The committer takes a token before each commit begins, so the bill for
PUTs is bounded whatever the load or the profiles of the topics. While
no token is left, batches go on arriving and join the commit that waits
for the next one: under load, commits grow instead of multiplying. A
``rate`` of 0 (or less) means no budget. No I/O; the clock is
``time.monotonic`` unless one is given (tests).
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable


class PutBudget:
    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1.0, burst if burst is not None else rate / 10)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()
        self.waited_s = 0.0  # time commits spent waiting for a token (for /metrics)

    @property
    def limited(self) -> bool:
        return self.rate > 0

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def delay(self) -> float:
        """Seconds until a token is there (0: now)."""
        if not self.limited:
            return 0.0
        self._refill()
        return 0.0 if self._tokens >= 1 else (1 - self._tokens) / self.rate

    def take(self) -> None:
        """Spend a token (call once :meth:`delay` said 0)."""
        if self.limited:
            self._refill()
            self._tokens -= 1

    async def acquire(self) -> None:
        """Wait for a token and spend it."""
        while (wait := self.delay()) > 0:
            self.waited_s += wait
            await asyncio.sleep(wait)
        self.take()
