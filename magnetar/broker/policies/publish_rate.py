"""Publish rate limits (Pulsar's ``publishRate`` policy of a namespace or a
topic): messages and bytes per second a topic accepts from its producers.

As in Pulsar, a producer over the rate is slowed, never failed: its
connection stops being read (the client's own sends then wait in its queue)
until the time the over-rate sends have paid for, and nothing already read
is refused. :meth:`PublishRateLimiter.charge` is a token bucket per topic
holding one second's worth: it answers how long the connection should wait.
"""
from __future__ import annotations

import time


class PublishRateLimiter:
    __slots__ = ("msg_rate", "byte_rate", "_msgs", "_bytes", "_at")

    def __init__(self, msg_rate: int, byte_rate: int) -> None:
        """``msg_rate`` messages and ``byte_rate`` bytes per second (<= 0: that one is not limited)."""
        self.msg_rate = msg_rate if msg_rate > 0 else 0
        self.byte_rate = byte_rate if byte_rate > 0 else 0
        self._msgs = float(self.msg_rate)
        self._bytes = float(self.byte_rate)
        self._at = time.monotonic()

    def same_as(self, msg_rate: int, byte_rate: int) -> bool:
        return self.msg_rate == max(msg_rate, 0) and self.byte_rate == max(byte_rate, 0)

    def charge(self, messages: int, nbytes: int) -> float:
        """Take ``messages`` / ``nbytes`` from the buckets; seconds the sender
        should wait before the next send (0: within the rate)."""
        now = time.monotonic()
        elapsed, self._at = now - self._at, now
        wait = 0.0
        if self.msg_rate:
            self._msgs = min(float(self.msg_rate), self._msgs + elapsed * self.msg_rate) - messages
            if self._msgs < 0:
                wait = -self._msgs / self.msg_rate
        if self.byte_rate:
            self._bytes = min(float(self.byte_rate), self._bytes + elapsed * self.byte_rate) - nbytes
            if self._bytes < 0:
                wait = max(wait, -self._bytes / self.byte_rate)
        return wait


def limiter_for(policy: dict | None, current: PublishRateLimiter | None) -> PublishRateLimiter | None:
    """The limiter a ``{"publishThrottlingRateInMsg", "publishThrottlingRateInByte"}``
    policy asks for (None: no limit); ``current`` is kept if it is the same."""
    if not policy:
        return None
    msgs, nbytes = int(policy.get("publishThrottlingRateInMsg", -1)), int(policy.get("publishThrottlingRateInByte", -1))
    if msgs <= 0 and nbytes <= 0:
        return None
    if current is not None and current.same_as(msgs, nbytes):
        return current
    return PublishRateLimiter(msgs, nbytes)
