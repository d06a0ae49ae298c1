"""Backlog quotas: how much a topic may hold for its slowest durable
subscription, and what the broker does once it holds more (Pulsar's
namespace ``backlog_quota_map`` and its retention policies).

**What counts.** A topic's backlog is what its slowest durable subscription
has not consumed: the entries after the smallest mark-delete position among
its durable cursors. Readers (non-durable subscriptions) hold nothing back
and do not count; neither does the compaction cursor (``__compaction``),
which moves when compaction runs, not when consumers read: letting it block
producers or evicting the entries it has not compacted yet would be wrong
either way. A topic without counted subscriptions has no backlog. Two
measures, one per quota type:

- ``destination_storage`` (``limitSize`` bytes): the stored bytes after that
  position (entry frames as on disk). Ledgers after the position's own count
  whole and exactly; the ledger the position is in counts its unconsumed
  entries at that ledger's average entry size, Pulsar's estimate too. Entries
  acknowledged individually past the mark-delete position still count: they
  stay on disk until the mark-delete position passes them.
- ``message_age`` (``limitTime`` seconds; 0 means unset, as in Pulsar): how
  long ago the oldest unacknowledged entry of the slowest subscription was
  published (the broker's publish time in the entry). Costs one entry read.

A topic is over a size quota when its backlog is not empty and reaches the
limit (Pulsar's ``>=``), over an age quota when that entry is older than the
limit.

**What happens**, by the quota's policy:

- ``producer_request_hold``: the attached producers are disconnected
  (CLOSE_PRODUCER) and new ones are refused with
  ProducerBlockedQuotaExceededError. A disconnected producer keeps
  reconnecting, its sends waiting, and gets in again once consumers have
  caught up (the official client fails a new producer's creation at once).
- ``producer_exception``: the same with ProducerBlockedQuotaExceededException,
  which clients do not retry: creating a producer fails, a reconnecting
  producer fails its pending sends, and any send reaching the topic while it
  is over quota is refused with that error.
- ``consumer_backlog_eviction``: producers are never blocked. Every counted
  cursor over the limit is moved forward, acknowledging its oldest entries as
  a skip does, until its backlog is at most 90% of the size limit, or holds
  no entry older than 90% of the age limit (Pulsar's target, so that one
  round buys room instead of evicting again at once).

**When.** :func:`check` runs when a producer attaches (``Topic.add_producer``)
and, for every loaded topic of a namespace with quotas, every
``backlog_quota_check_interval_s`` (:func:`check_periodically`). Nothing is
measured on the publish path: between two checks the backlog can grow past
the limit (as in Pulsar); a send only tests ``Topic.quota_block``.

**Failure modes.** A storage error while reading the oldest entry or moving a
cursor propagates out of :func:`check`: a producer attaching is refused with
it, the periodic round logs it and goes on with the other topics.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import time

from magnetar.storage import LedgerInfo, ManagedLedger, Position

from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.errors import BacklogQuotaHold, BacklogQuotaRefusal, BrokerError
from magnetar.broker.namespaces.policies import BacklogQuota

from magnetar.broker.subscriptions.subscription import COMPACTION_CURSOR, Subscription

from .sweep import start_sweep
from .views import PolicedTopic, ServedTopics

log = logging.getLogger(__name__)

SIZE = "destination_storage"
AGE = "message_age"
HOLD = "producer_request_hold"
REFUSE = "producer_exception"
EVICT = "consumer_backlog_eviction"
#: Eviction leaves this fraction of the limit.
EVICTION_TARGET = 0.9


# -- measuring ------------------------------------------------------------------------
def counted_subscriptions(topic: PolicedTopic) -> list[Subscription]:
    """The subscriptions whose backlog the quotas limit: durable ones, except compaction's."""
    return [sub for sub in topic.subscriptions.values() if sub.durable and sub.name != COMPACTION_CURSOR]


def slowest_mark_delete(topic: PolicedTopic) -> Position | None:
    """The smallest mark-delete position of the counted subscriptions (None: there are none)."""
    return min((sub.cursor.mark_delete_position for sub in counted_subscriptions(topic)), default=None)


def backlog_size(topic: PolicedTopic) -> int:
    """Stored bytes the slowest counted subscription has not consumed (0 without one)."""
    mark_delete = slowest_mark_delete(topic)
    return 0 if mark_delete is None else bytes_after(topic.ledger, mark_delete)


def bytes_after(ml: ManagedLedger, mark_delete: Position) -> int:
    """Stored bytes of the confirmed entries after ``mark_delete`` (see the module notes)."""
    return sum(_unconsumed_bytes(info, mark_delete) for info in ml.ledgers)


def _unconsumed_bytes(info: LedgerInfo, mark_delete: Position) -> int:
    if info.ledger_id > mark_delete.ledger_id:
        return info.size
    if info.ledger_id < mark_delete.ledger_id or not info.entries:
        return 0
    left = info.entries - mark_delete.entry_id - 1
    return info.size * left // info.entries if left > 0 else 0


async def oldest_backlog_age_ms(topic: PolicedTopic, now_ms: int) -> int:
    """How long ago the first entry the slowest counted subscription has not
    acknowledged was published; 0 when there is no such entry."""
    mark_delete = slowest_mark_delete(topic)
    ml = topic.ledger
    last = ml.last_confirmed
    if mark_delete is None or last is None:
        return 0
    first = ml.next_position(mark_delete)
    if first > last:
        return 0
    entries = await ml.read_entries(first, 1)
    if not entries:  # trimmed under us: nothing of it is left to be old
        return 0
    return max(0, now_ms - entry_info(entries[0].data).publish_time)


async def is_exceeded(topic: PolicedTopic, quota: BacklogQuota, now_ms: int) -> bool:
    if quota.kind == SIZE:
        size = backlog_size(topic)
        return size > 0 and size >= quota.limit
    return await oldest_backlog_age_ms(topic, now_ms) > quota.limit * 1000


def eviction_point(ml: ManagedLedger, mark_delete: Position, max_bytes: int) -> Position | None:
    """The first mark-delete position at or after ``mark_delete`` with at most
    ``max_bytes`` stored after it, by :func:`bytes_after`'s measure; None if
    ``mark_delete`` already has. Costs O(ledgers + log(entries of one ledger)),
    no reads."""
    ledgers = sorted((info for info in ml.ledgers if info.entries), key=lambda info: info.ledger_id)
    remaining = sum(_unconsumed_bytes(info, mark_delete) for info in ledgers)
    if remaining <= max_bytes:
        return None
    for info in ledgers:
        here = _unconsumed_bytes(info, mark_delete)
        if not here:
            continue
        later = remaining - here
        if later > max_bytes:  # acknowledging this whole ledger is not enough
            remaining = later
            continue
        # Some entry of this ledger is the answer: the last one leaves `later`.
        lo = mark_delete.entry_id + 1 if info.ledger_id == mark_delete.ledger_id else 0
        hi = info.entries - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if later + _unconsumed_bytes(info, Position(info.ledger_id, mid)) <= max_bytes:
                hi = mid
            else:
                lo = mid + 1
        return Position(info.ledger_id, lo)
    return None  # not reached: acknowledging everything leaves 0 bytes


# -- acting ---------------------------------------------------------------------------
def refusal(topic: PolicedTopic, quota: BacklogQuota) -> BrokerError:
    """The error a producer (or, under ``producer_exception``, a send) gets while ``quota`` blocks ``topic``."""
    limit = f"{quota.limit} bytes" if quota.kind == SIZE else f"{quota.limit} s"
    if quota.policy == HOLD:
        return BacklogQuotaHold(f"backlog of {topic.name} exceeds its {quota.kind} quota ({limit}): "
                                "producers wait until consumers catch up")
    return BacklogQuotaRefusal(f"backlog of {topic.name} exceeds its {quota.kind} quota ({limit}): "
                               "producers are refused until consumers catch up")


async def check(topic: PolicedTopic, now_ms: int | None = None) -> BacklogQuota | None:
    """Measure ``topic``'s backlog against its quotas and apply their policies.

    Sets ``topic.quota_block`` to the first exceeded quota whose policy blocks
    producers (size before age), or None, and returns it; while one blocks,
    the attached producers are disconnected. Exceeded eviction quotas move
    cursors. Callers hold the topic's admission lock, so producers are
    admitted against the state this leaves. Storage errors propagate.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    blocking = None
    for quota in topic.backlog_quotas:
        if not await is_exceeded(topic, quota, now):
            continue
        if quota.policy == EVICT:
            await _evict(topic, quota, now)
        elif blocking is None:
            blocking = quota
    was, topic.quota_block = topic.quota_block, blocking
    if blocking is not None:
        if was != blocking:
            log.info("%s is over its %s backlog quota (%d): %s", topic.name, blocking.kind, blocking.limit,
                     "holding producers" if blocking.policy == HOLD else "refusing producers")
        for producer in list(topic.producers.values()):
            topic.close_producer(producer)  # CLOSE_PRODUCER: the client reconnects
    elif was is not None:
        log.info("%s is within its backlog quotas again: producers are admitted", topic.name)
    return blocking


async def _evict(topic: PolicedTopic, quota: BacklogQuota, now_ms: int) -> None:
    for sub in counted_subscriptions(topic):
        before = sub.backlog()
        if quota.kind == SIZE:
            point = eviction_point(topic.ledger, sub.cursor.mark_delete_position,
                                   int(quota.limit * EVICTION_TARGET))
            if point is None:
                continue
            await sub.acknowledge_cumulative(point)
        else:
            await cursor_ops.expire(sub, quota.limit * EVICTION_TARGET, now_ms)
        evicted = before - sub.backlog()
        if evicted:
            log.info("evicted %d entries of %s subscription %s (%s backlog quota %d)", evicted, topic.name,
                     sub.name, quota.kind, quota.limit)


# -- the periodic task ----------------------------------------------------------------
async def check_all(service: ServedTopics) -> None:
    """One round over the loaded topics that have quotas (or are still blocked
    by one that was removed). A failure on one topic is logged; the others
    are still checked."""
    for topic in list(service.topics.values()):
        if topic.closed or not (topic.backlog_quotas or topic.quota_block is not None):
            continue
        try:
            await topic.check_backlog_quota()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # storage trouble on one topic must not stop the round
            log.warning("cannot check the backlog quota of %s: %s", topic.name, exc)


def start_checks(service: ServedTopics, interval_s: float) -> asyncio.Task:
    """:func:`check_all` every ``interval_s`` seconds (a :mod:`.sweep`), until cancelled."""
    return start_sweep(interval_s, functools.partial(check_all, service), "backlog quota")
