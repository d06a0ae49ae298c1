"""``WallClock``: stamps for monotonic instants keep the instants' order,
whatever runs between clock reads afterwards (the raw generator's
end-to-end stamps once went backwards on a loaded machine)."""
from __future__ import annotations

import time

from magnetar.perf.payload import WallClock

MS = 1_000_000  # ns


def test_a_stamp_is_the_wall_clock_of_the_instant():
    clock = WallClock()
    before = time.time_ns() // 1000
    stamp = clock.us(time.monotonic_ns())
    after = time.time_ns() // 1000
    # Within a millisecond either side: the offset was read once, just before.
    assert before - 1000 <= stamp <= after + 1000


def test_stamps_keep_the_order_of_their_instants_when_reads_are_delayed(monkeypatch):
    clock = WallClock()
    real = time.time_ns
    calls = []

    def late_wall_clock() -> int:
        # As if preempted for 5 ms between a monotonic read and this one, every other call.
        calls.append(None)
        return real() + (5 * MS if len(calls) % 2 else 0)

    monkeypatch.setattr(time, "time_ns", late_wall_clock)
    start = time.monotonic_ns()
    stamps = [clock.us(start + i * MS) for i in range(20)]  # entries due 1 ms apart
    assert stamps == sorted(stamps) and len(set(stamps)) == 20
    assert [b - a for a, b in zip(stamps, stamps[1:])] == [1000] * 19
