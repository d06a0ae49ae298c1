"""WatchRegistry: which watches a change reaches, and that matching a change
costs its key's depth, not the number of watches (a broker holds one watch
per managed ledger; object storage commits a record per ledger at once)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import _watches
from magnetar.metadata.store import EventType, Notification


def _note(key: str) -> Notification:
    return Notification(EventType.MODIFIED, key)


async def test_a_change_reaches_the_watches_of_its_key_and_its_ancestors_in_the_order_added():
    loop = asyncio.get_running_loop()
    registry = _watches.WatchRegistry()
    got: list[tuple[str, str]] = []
    for prefix in ["/a/b", "/", "/a", "/a/bc", "/a/b/c/d", "/x"]:
        registry.add(prefix, lambda note, p=prefix: got.append((p, note.key)))
    registry.dispatch(loop, [_note("/a/b/c")])
    await asyncio.sleep(0)
    assert got == [("/a/b", "/a/b/c"), ("/", "/a/b/c"), ("/a", "/a/b/c")]
    got.clear()
    registry.dispatch(loop, [_note("/a/b")])
    await asyncio.sleep(0)
    assert got == [("/a/b", "/a/b"), ("/", "/a/b"), ("/a", "/a/b")]  # not "/a/bc" nor "/a/b/c/d"


async def test_a_cancelled_watch_gets_nothing_and_after_skips_older_revisions():
    loop = asyncio.get_running_loop()
    registry = _watches.WatchRegistry()
    got: list[str] = []
    w = registry.add("/k", lambda note: got.append("first"))
    registry.add("/k", lambda note: got.append("second"), after=10)
    w.cancel()
    registry.dispatch(loop, [_note("/k/1")], revision=10)
    registry.dispatch(loop, [_note("/k/2")], revision=11)
    await asyncio.sleep(0)
    assert got == ["second"]
    registry.clear()
    registry.dispatch(loop, [_note("/k/3")], revision=12)
    await asyncio.sleep(0)
    assert got == ["second"]


async def test_matching_a_change_does_not_try_every_watch(monkeypatch):
    calls = 0
    real = _watches.key_matches

    def counting(prefix, key):
        nonlocal calls
        calls += 1
        return real(prefix, key)

    monkeypatch.setattr(_watches, "key_matches", counting)
    loop = asyncio.get_running_loop()
    registry = _watches.WatchRegistry()
    delivered = []
    for i in range(2000):
        registry.add(f"/managed-ledgers/t{i}", delivered.append)
    registry.dispatch(loop, [_note(f"/object-ledgers/{i:020d}/s/{i:012d}") for i in range(2000)])
    registry.dispatch(loop, [_note(f"/managed-ledgers/t{i}") for i in range(2000)])
    await asyncio.sleep(0)
    assert len(delivered) == 2000
    assert calls == 2000  # only the watch each change names: it was 2000 x 4000 tries


async def test_an_unwatched_root_refuses_watches_inside_it_and_its_changes_reach_no_watch():
    loop = asyncio.get_running_loop()
    registry = _watches.WatchRegistry(["/bulk/"])
    assert registry.unwatched == ("/bulk",)
    for inside in ["/bulk", "/bulk/1", "/bulk/1/s"]:
        with pytest.raises(ValueError, match="not watched"):
            registry.add(inside, lambda note: None)
    got: list[str] = []
    registry.add("/", lambda note: got.append(note.key))
    registry.add("/bulky", lambda note: got.append("bulky " + note.key))
    registry.dispatch(loop, [_note("/bulk"), _note("/bulk/1/s/2"), _note("/bulky/1"), _note("/a")])
    await asyncio.sleep(0)
    assert got == ["/bulky/1", "bulky /bulky/1", "/a"]


def test_bad_unwatched_roots_are_refused():
    for bad in [["/"], ["relative"], ["/a//b"]]:
        with pytest.raises(ValueError):
            _watches.WatchRegistry(bad)
