"""Moving a subscription's cursor on an operator's behalf: skip, clear the
backlog, expire by age, reset to a time or a message id, create at a position.

These are the admin API's subscription operations, and the tool of the
message TTL task and of age-based backlog eviction (:func:`expire`). Moving
forward goes through :meth:`Subscription.acknowledge_cumulative`, so it is
persisted like an ack, dispatchers forget what they had handed out behind
the new position, and consumed ledgers become trimmable. Resetting (which
may move backwards) disconnects the consumers first, as a seek does.

Failure modes: storage errors propagate (``StorageError``); nothing here
raises for an empty topic or a subscription with no backlog, it just moves
nothing and returns 0.
"""
from __future__ import annotations

import time

from magnetar.storage import Position

from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.entries.markers import is_marker
from magnetar.broker.entries.message_peek import producer_metadata
from magnetar.broker.namespaces.resources import PreconditionFailed
from .subscription import Subscription

from .views import TopicView

INT64_MAX = (1 << 63) - 1


async def skip(sub: Subscription, count: int) -> int:
    """Acknowledge the next ``count`` unacknowledged entries; returns how many.

    Pulsar counts skipped *entries* too (a batch is one).
    """
    cursor = sub.cursor
    ml = sub.ledger
    last = ml.last_confirmed
    if count <= 0 or last is None:
        return 0
    pos = cursor.mark_delete_position
    skipped = 0
    target = None
    while skipped < count:
        pos = ml.next_position(pos)
        if pos > last:
            break
        if not cursor.is_deleted(pos):
            skipped += 1
            target = pos
    if target is not None:
        await sub.acknowledge_cumulative(target)
    return skipped


async def nth_in_backlog(sub: Subscription, n: int):
    """The ``n``-th (from 1) entry the subscription has not acknowledged, as a
    stored :class:`~magnetar.storage.Entry`, or None if the backlog is shorter.

    Pulsar's peek: entries acknowledged individually are passed over, and so
    are markers (replication's own entries, which no consumer ever sees).
    Reads one entry per backlog entry it passes; peeks are for operators.
    """
    ml = sub.ledger
    last = ml.last_confirmed
    if n < 1 or last is None:
        return None
    pos = sub.cursor.mark_delete_position
    seen = 0
    while True:
        pos = ml.next_position(pos)
        if pos > last:
            return None
        if sub.cursor.is_deleted(pos):
            continue
        entries = await ml.read_entries(pos, 1)
        if not entries:
            return None
        entry = entries[0]
        pos = entry.position  # a rollover may skip to the next ledger's first entry
        meta = producer_metadata(entry.data)
        if meta is not None and is_marker(meta):
            continue
        seen += 1
        if seen == n:
            return entry


async def clear_backlog(sub: Subscription) -> int:
    """Acknowledge everything stored; returns the entries that were in the backlog."""
    last = sub.ledger.last_confirmed
    backlog = sub.backlog()
    if last is not None and backlog:
        await sub.acknowledge_cumulative(last)
    return backlog


async def expire(sub: Subscription, age_s: float, now_ms: int | None = None) -> int:
    """Acknowledge the entries published more than ``age_s`` seconds ago; returns
    how many backlog entries that removed.

    Publish times come from each entry's broker entry metadata and grow along
    the log, so the boundary is found by binary search; the common case (the
    first unacknowledged entry is still young) costs one read.
    """
    ml = sub.ledger
    last = ml.last_confirmed
    if last is None:
        return 0
    cutoff = (int(time.time() * 1000) if now_ms is None else now_ms) - int(age_s * 1000)
    first_unacked = ml.next_position(sub.cursor.mark_delete_position)
    if first_unacked > last:
        return 0
    head = await ml.read_entries(first_unacked, 1)
    if not head or entry_info(head[0].data).publish_time >= cutoff:
        return 0
    young = await ml.find_first(lambda e: entry_info(e.data).publish_time >= cutoff)
    upto = last if young is None else _before(young)
    before = sub.backlog()
    await sub.acknowledge_cumulative(upto)
    expired = before - sub.backlog()
    if expired > 0:
        sub.expired += expired
        sub.last_expire_ms = int(time.time() * 1000)
    return expired


def _before(pos: Position) -> Position:
    # (ledger, -1) sorts after every entry of earlier ledgers and before this
    # ledger's first: the managed ledger's own "nothing of this ledger yet".
    return Position(pos.ledger_id, pos.entry_id - 1)


def position_for_message_id(topic: TopicView, ledger_id: int, entry_id: int, excluded: bool = False) -> Position:
    """The first entry to read for a message id from the admin API.

    Pulsar's sentinels: a negative id is *earliest*, ``Long.MAX_VALUE`` is
    *latest*. ``excluded`` starts after the message instead of at it.
    """
    ml = topic.ledger
    if ledger_id < 0 or entry_id < 0:
        first = ml.first_position()
        return first if first is not None else topic.next_write_position()
    if ledger_id >= INT64_MAX or entry_id >= INT64_MAX:
        return topic.next_write_position()
    pos = Position(ledger_id, entry_id)
    if not ml._is_confirmed_entry(pos) and pos != topic.next_write_position():
        # Moving a cursor to a message that is not there would silently skip
        # or replay the wrong entries: refuse, and say what does exist.
        first, last = ml.first_position(), ml.last_confirmed
        stored = f"entries {first} to {last}" if first is not None and last is not None else "no entries"
        raise PreconditionFailed(f"message id {pos} does not exist in the topic (it holds {stored}); "
                                 f"use earliest, latest or an id it holds")
    return ml.next_position(pos) if excluded else pos


async def reset_to_time(sub: Subscription, timestamp_ms: int) -> Position:
    """Rewind or advance to the first entry published at or after ``timestamp_ms``."""
    position = await sub.topic.find_position_by_time(timestamp_ms)
    await sub.reset_cursor(position)
    return position


async def reset_to(sub: Subscription, position: Position) -> None:
    """Make ``position`` the next entry the subscription reads."""
    await sub.reset_cursor(position)


async def create(topic: TopicView, name: str, position: Position | None, earliest: bool = False) -> Subscription:
    """A durable subscription without consumers, reading from ``position``
    (None: from the end, or from the start with ``earliest``).

    Raises KeyError if the subscription exists (the caller's 409).
    """
    if name in topic.subscriptions:
        raise KeyError(name)
    cursor = await topic.ledger.open_cursor(name, "earliest" if earliest else "latest")
    if position is not None:
        await cursor.reset(position)
    sub = topic.subscriptions.get(name)
    if sub is None:  # nobody subscribed while we awaited
        sub = Subscription(topic, name, cursor, durable=True)
        topic.subscriptions[name] = sub
    return sub
