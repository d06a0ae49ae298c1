"""Message bodies that carry their send time.

For end-to-end latency the producer writes ``time.time_ns() // 1000`` (wall
clock, microseconds) big-endian into the first 8 bytes; the consumer, on the
same machine, subtracts it from its own clock. Wall clock and not monotonic:
both sides must read the same clock and CLOCK_REALTIME is shared by every
process. Bodies shorter than 8 bytes cannot carry a stamp; consumers then
fall back to the broker's publish timestamp (millisecond resolution).
"""
from __future__ import annotations

import struct
import time

STAMP = struct.Struct(">Q")
STAMP_SIZE = STAMP.size


def filler(size: int) -> bytes:
    """A constant body of ``size`` bytes (not all zeros, so nothing can
    special-case it)."""
    pattern = b"magnetar-perf-"
    return (pattern * (size // len(pattern) + 1))[:size]


class Stamper:
    """``stamp()`` returns a fresh body of ``size`` bytes with the current
    time in front (or the constant body when ``size`` < 8)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._tail = filler(size)[STAMP_SIZE:] if size >= STAMP_SIZE else b""
        self._plain = filler(size)
        self.can_stamp = size >= STAMP_SIZE

    def stamp(self) -> bytes:
        if not self.can_stamp:
            return self._plain
        return STAMP.pack(time.time_ns() // 1000) + self._tail


class WallClock:
    """Wall-clock microseconds for monotonic instants, from one offset read
    when the clock is made.

    Why one offset: reading ``time.time_ns()`` beside each monotonic reading
    puts whatever runs between the two reads into the stamp (a preemption on
    a loaded machine lasts milliseconds), so entries due 1 ms apart could be
    stamped out of order. With one offset, stamps keep the order of the
    instants they stand for. The offset is taken from the try with the
    shortest gap between its two monotonic reads; a wall-clock step during
    the run (NTP) is not followed, which shifts latencies by the step.
    """

    def __init__(self, tries: int = 5) -> None:
        best_gap = best_offset = None
        for _ in range(max(1, tries)):
            before = time.monotonic_ns()
            wall = time.time_ns()
            after = time.monotonic_ns()
            if best_gap is None or after - before < best_gap:
                best_gap, best_offset = after - before, wall - (before + after) // 2
        self.offset_ns: int = best_offset

    def us(self, monotonic_ns: int) -> int:
        """The wall-clock time, in microseconds since the epoch, of the
        instant ``time.monotonic_ns()`` called ``monotonic_ns``."""
        return (monotonic_ns + self.offset_ns) // 1000


def stamp_of(data: bytes) -> int | None:
    """The send time (us since the epoch) in ``data``, or None if it has none."""
    if len(data) < STAMP_SIZE:
        return None
    (us,) = STAMP.unpack_from(data, 0)
    # A plausible stamp is within a day of now; anything else is a foreign body.
    if abs(us - time.time_ns() // 1000) > 86_400_000_000:
        return None
    return us
