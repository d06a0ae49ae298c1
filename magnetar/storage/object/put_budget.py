"""A broker's PUT budget: at most ``rate`` commit objects a second, with
bursts of ``burst`` (a token bucket).

The committer takes a token before each commit begins, so the bill for
PUTs is bounded whatever the load or the profiles of the topics. While
no token is left, batches go on arriving and join the commit that waits
for the next one: under load, commits grow instead of multiplying. A
``rate`` of 0 (or less) means no budget. No I/O; the clock is
``time.monotonic`` unless one is given (tests).

**Background PUTs** (a sealed ledger's chunks, :mod:`.compactor`) take
their tokens by :meth:`PutBudget.acquire_background`: in arrival order,
one of them waiting for the bucket at a time, and at most
``BACKGROUND_SHARE`` of the rate (their own bucket first). Before, each
compaction polled the bucket itself: after a burst of 10,000 rollovers,
10,000 of them woke every time a token was due (about every 4 ms) and the
committer, one poller among them, hardly ever got one: receipts stalled
for as long as the chunk PUTs took the whole budget. Now the committer
competes with one background taker, which gets no more than its share.
A closing broker commits nothing more: :meth:`PutBudget.share_all` then
gives the background takers the whole rate (its compactions' last PUTs).
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable

#: The share of a limited budget's rate that background PUTs may take.
BACKGROUND_SHARE = 0.2


class PutBudget:
    def __init__(self, rate: float, burst: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1.0, burst if burst is not None else rate / 10)
        self._burst_per_rate = self.burst / rate if rate > 0 else 0.0  # kept when the rate changes
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()
        self.waited_s = 0.0  # time commits spent waiting for a token (for /metrics)
        #: Background takers: their own bucket (their share), and their line (one waits at a time).
        self._background: PutBudget | None = None
        self._line: asyncio.Lock | None = None
        self._share = BACKGROUND_SHARE

    def set_rate(self, rate: float) -> None:
        """Change the rate (:mod:`.budget_pacer`). Tokens gathered so far
        count at the old rate; the burst keeps its ratio to the rate (at
        least 1); background PUTs keep their share. A budget without a
        limit stays without, and a rate of 0 or less is ignored."""
        if not self.limited or rate <= 0 or rate == self.rate:
            return
        self._refill()
        self.rate = rate
        self.burst = max(1.0, self._burst_per_rate * rate)
        self._tokens = min(self._tokens, self.burst)
        if self._background is not None:
            self._background.set_rate(rate * self._share)

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

    async def acquire(self, *, counted: bool = True) -> None:
        """Wait for a token and spend it (``counted``: the wait is added to ``waited_s``)."""
        while (wait := self.delay()) > 0:
            if counted:
                self.waited_s += wait
            await asyncio.sleep(wait)
        self.take()

    async def acquire_background(self) -> None:
        """Wait for a token and spend it, for a background PUT: after the
        background takers that came before, within ``BACKGROUND_SHARE`` of
        the rate (see the module docstring). No wait without a budget."""
        if not self.limited:
            return
        if self._line is None:
            self._background = PutBudget(self.rate * self._share, burst=1, clock=self._clock)
            self._line = asyncio.Lock()  # fair: woken one at a time, in order
        async with self._line:
            await self._background.acquire()
            await self.acquire(counted=False)  # /metrics counts the commits' waits

    def share_all(self) -> None:
        """Background PUTs may take the whole rate from now on (nothing
        else will: the broker is closing). The bill's bound stays."""
        self._share = 1.0
        if self._background is not None:
            self._background.set_rate(self.rate)
