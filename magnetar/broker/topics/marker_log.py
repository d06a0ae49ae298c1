"""A topic's side of markers (``entries/markers.py``): storing the ones the
broker writes, noticing the ones replicators bring in, and keeping idle
subscriptions from counting them as backlog.

Functions of a :class:`~.topic.Topic` (typed loosely: this module sits below
it); the topic's ``marker_handler`` (geo-replication's PIP-33 controller) is
the only reader of replicated markers.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import Position

from magnetar.broker.entries.markers import is_marker


def append(topic: Any, entry: bytes) -> asyncio.Future:
    """Append a built marker entry; a future of its Position."""
    appended = topic.ledger.append(entry)
    appended.add_done_callback(lambda f: _stored(topic, f))
    return appended


def replicated_marker(topic: Any, block: PayloadBlock) -> Callable[[int, int], None] | None:
    """For a replicator's entry that is a marker (only replicators' producers
    bring markers in): what to call with its place once it is stored, which
    hands it to the topic's marker handler. None for any other entry."""
    try:
        metadata = block.metadata
    except Exception:
        return None
    if not is_marker(metadata):
        return None
    payload = bytes(block.payload)
    handler = topic.marker_handler

    def on_marker(position: Position) -> None:
        step_idle_cursors_over(topic, position)
        if handler is topic.marker_handler:
            handler.on_replicated_marker(position, metadata, payload)

    def stored(ledger_id: int, entry_id: int) -> None:
        # Called from storage's completion path: act on the next turn of the
        # loop, once storage has finished its own bookkeeping.
        asyncio.get_running_loop().call_soon(on_marker, Position(ledger_id, entry_id))

    return stored


def _stored(topic: Any, appended: asyncio.Future) -> bool:
    if appended.cancelled() or appended.exception() is not None:
        return False
    step_idle_cursors_over(topic, appended.result())
    return True


def step_idle_cursors_over(topic: Any, marker: Position) -> None:
    """Subscriptions caught up to just before a marker move past it: with no
    consumer to read (and so acknowledge) it, markers written every second
    would otherwise pile up as backlog (Pulsar #6437)."""
    if marker.entry_id == 0:
        return
    before = Position(marker.ledger_id, marker.entry_id - 1)
    for sub in list(topic.subscriptions.values()):
        if not sub.consumers and not sub.cursor.closed and sub.cursor.mark_delete_position == before:
            task = asyncio.get_running_loop().create_task(sub.acknowledge_cumulative(marker))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
