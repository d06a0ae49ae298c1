"""Reconnect delays: exponential from 100 ms, capped at 30 s, with jitter.

Jitter spreads the reconnect storm when a broker restarts under many
clients; it only ever shortens a delay, so the cap holds.
"""
from __future__ import annotations

import random


class Backoff:
    """``next()`` yields initial, 2x, 4x ... up to ``maximum`` seconds (each
    reduced by up to ``jitter`` of itself); ``reset()`` starts over after a
    success."""

    def __init__(self, initial: float = 0.1, maximum: float = 30.0, jitter: float = 0.1,
                 rng: random.Random | None = None) -> None:
        if not 0 < initial <= maximum:
            raise ValueError("need 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._current = initial

    def next(self) -> float:
        delay = self._current
        self._current = min(self._current * 2, self.maximum)
        return delay - delay * self.jitter * self._rng.random()

    def reset(self) -> None:
        self._current = self.initial
