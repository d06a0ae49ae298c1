"""Watches are matched by their key's ancestors, not by a scan of every
watch: the same deliveries, in the order the watches were added."""
from __future__ import annotations

import asyncio

from magnetar.metadata._watches import WatchRegistry
from magnetar.metadata.store import EventType, Notification


async def test_a_change_reaches_exactly_the_watches_on_its_ancestors_in_registration_order():
    registry = WatchRegistry()
    got: list[tuple[str, str]] = []
    for prefix in ("/a/b", "/", "/a/bc", "/a", "/a/b/c/d", "/x"):
        registry.add(prefix, lambda note, p=prefix: got.append((p, note.key)))
    for i in range(1000):  # unrelated watches (one per managed ledger, say)
        registry.add(f"/managed-ledgers/t{i}", lambda note: got.append(("other", note.key)))
    cancelled = registry.add("/a/b/c", lambda note: got.append(("cancelled", note.key)))
    cancelled.cancel()
    registry.dispatch(asyncio.get_running_loop(), [Notification(EventType.MODIFIED, "/a/b/c")])
    await asyncio.sleep(0)
    assert got == [("/a/b", "/a/b/c"), ("/", "/a/b/c"), ("/a", "/a/b/c")]
