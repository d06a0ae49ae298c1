"""Readers' windows (magnetar/storage/object/read_windows.py): what a
reader announces is pending until it has read it, and a reader that stops
pins nothing for longer than the TTL. No I/O."""
from __future__ import annotations

from magnetar.storage.object.index import new_section
from magnetar.storage.object.pending_sections import PendingSections
from magnetar.storage.object.read_windows import Pending, ReadWindows


def sections(keys: list[str]) -> list:
    return [new_section(i, 1, key, 10 * i, 10) for i, key in enumerate(keys)]


def test_a_window_is_pending_until_read_and_replaced_by_the_next():
    now = [0.0]
    windows = ReadWindows(ttl_s=30, clock=lambda: now[0])
    windows.ahead(1, sections(["a", "b"]))
    windows.ahead(2, sections(["b", "c"]))
    assert "a" in windows and sorted(windows.ranges("b")) == [(0, 10), (10, 20)]
    windows.taken(1, "a")
    assert "a" not in windows and "b" in windows
    windows.ahead(1, sections(["d"]))  # its next window replaces the last
    assert windows.ranges("b") == [(0, 10)] and "d" in windows


def test_a_reader_that_stops_pins_nothing_past_the_ttl():
    now = [0.0]
    windows = ReadWindows(ttl_s=30, clock=lambda: now[0])
    windows.ahead(1, sections(["a"]))  # its consumer goes away
    now[0] = 20.0
    windows.ahead(2, sections(["b"]))
    assert "a" in windows
    now[0] = 31.0
    windows.ahead(2, sections(["c"]))  # any reader's next window drops the stale ones
    assert "a" not in windows and "c" in windows and len(windows) == 1


def test_the_gets_see_the_compactions_and_the_readers_pending_ranges():
    compactions, readers = PendingSections(), ReadWindows()
    compactions.add(7, sections(["a"]))
    readers.ahead(8, sections(["x", "a"]))
    pending = Pending(compactions, readers)
    assert "a" in pending and "x" in pending and "y" not in pending
    assert sorted(pending.ranges("a")) == [(0, 10), (10, 20)]


def test_the_windows_hold_at_most_max_sections_in_all():
    windows = ReadWindows(max_sections=3)
    windows.ahead(1, sections(["a", "b"]))
    windows.ahead(2, sections(["c", "d"]))  # what fits
    assert "c" in windows and "d" not in windows
    windows.ahead(3, sections(["e"]))  # nothing fits: its reads are as before
    assert "e" not in windows and len(windows) == 2
    windows.ahead(1, sections(["f"]))  # a renewal frees its old window first
    windows.ahead(3, sections(["e"]))
    assert "e" in windows and "a" not in windows
