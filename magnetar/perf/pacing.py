"""A pacer for fixed-rate load: how many sends are due now.

The pacer keeps the long-run average exact: sends due at time t are
``rate * (t - start)``, so a hiccup (GC, a blocked send) is caught up in a
burst afterwards instead of lowering the rate, as a coordinated-omission-aware
load generator should. Bursts are capped so one long stall does not turn into
an unbounded flood.
"""
from __future__ import annotations

import time


class Pacer:
    def __init__(self, rate: float, start: float | None = None, max_burst: int = 1000) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive (0 means unpaced: use no pacer)")
        self.rate = rate
        self.start = time.monotonic() if start is None else start
        self.max_burst = max_burst

    def due(self, sent: int, now: float | None = None) -> int:
        """Sends due now, given ``sent`` so far (0 when ahead of schedule)."""
        now = time.monotonic() if now is None else now
        return max(0, min(self.max_burst, int((now - self.start) * self.rate) - sent))

    def wait(self, sent: int) -> None:
        """Sleep until about a millisecond's worth of sends is due (at most
        10 ms, so the caller can check its stop conditions).

        Waking for every single send would cost a syscall per message at
        high rates; a 1 ms quantum is below any batching delay worth using.
        """
        quantum = max(1, int(self.rate / 1000))
        next_at = self.start + (sent + quantum) / self.rate
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(min(delay, 0.01))
