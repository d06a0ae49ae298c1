"""A topic's stats in Pulsar's shapes, read from the topic without changing it."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from magnetar.broker.entries.entry_format import entry_info
from magnetar.storage import StorageError
from magnetar.broker.policies import backlog_quota

from .producer import AccessMode
from magnetar.broker.subscriptions.subscription import SubType


class RateMeter:
    """Per-second rates of a topic's counters, measured between two looks at
    least ``window`` seconds apart (a look sooner gives the last rates), so
    stats read every few seconds show the traffic of those seconds."""

    def __init__(self, window: float = 1.0) -> None:
        self.window = window
        self._mark: tuple[float, tuple[int, ...]] | None = None
        self._rates: tuple[float, ...] = ()

    def rates(self, counters: tuple[int, ...], now: float | None = None) -> tuple[float, ...]:
        now = time.monotonic() if now is None else now
        if self._mark is None:
            self._mark, self._rates = (now, counters), tuple(0.0 for _ in counters)
        elif now - self._mark[0] >= self.window:
            then, before = self._mark
            self._rates = tuple(max(0.0, (c - b) / (now - then)) for c, b in zip(counters, before))
            self._mark = (now, counters)
        return self._rates


def iso(epoch_seconds: float) -> str:
    """Pulsar's ``connectedSince`` form: ISO 8601 with milliseconds, UTC."""
    return datetime.fromtimestamp(epoch_seconds, timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def topic_stats(topic: Any) -> dict:
    """Pulsar's TopicStats shape (admin ``/stats``). Rates are those of the
    last stats interval (``stats_sampling.py``); timestamps are Unix ms, 0
    for "not yet"; ``earliestMsgPublishTimeInBacklog(s)`` are 0 unless the
    caller fills them (:func:`fill_backlog_times`, Pulsar's
    ``getEarliestTimeInBacklog``)."""
    limits = {quota.kind: quota.limit for quota in topic.backlog_quotas}
    rate_in, throughput_in, rate_out, throughput_out = topic.interval_rates.rates
    subscriptions = {name: subscription_stats(sub) for name, sub in topic.subscriptions.items()}
    return {
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "averageMsgSize": throughput_in / rate_in if rate_in else 0.0,
        "msgInCounter": topic.msg_in,
        "bytesInCounter": topic.bytes_in,
        "msgOutCounter": topic.msg_out,
        "bytesOutCounter": topic.bytes_out,
        "msgChunkPublished": False,
        "storageSize": topic.ledger.total_size,
        "offloadedStorageSize": 0,
        # Pulsar's names; -1: no limit. The size is backlog_quota's measure.
        "backlogSize": backlog_quota.backlog_size(topic),
        "earliestMsgPublishTimeInBacklogs": 0,
        "backlogQuotaLimitSize": limits.get(backlog_quota.SIZE, -1),
        "backlogQuotaLimitTime": limits.get(backlog_quota.AGE, -1),
        "producersBlockedByBacklogQuota": topic.quota_block.kind if topic.quota_block is not None else None,
        "nonContiguousDeletedMessagesRanges": sum(s["nonContiguousDeletedMessagesRanges"]
                                                  for s in subscriptions.values()),
        "publishers": [publisher_stats(p) for p in topic.producers.values()],
        "waitingPublishers": len(topic.waiting),
        "subscriptions": subscriptions,
        "replication": {remote: replicator.stats() for remote, replicator in topic.replicators.items()},
        "deduplicationStatus": "Enabled" if topic.dedup.enabled else "Disabled",
        "topicEpoch": topic.topic_epoch,
        "ownerBroker": f"{topic.config.advertised_address}:{topic.config.admin_port}",
        "deduplicationEnabled": topic.dedup.enabled,
        # Magnetar's own: the PIP-33 controller of a replicated topic (absent otherwise).
        **({"replicatedSubscriptions": topic.marker_handler.stats()} if topic.marker_handler is not None else {}),
    }


def publisher_stats(p: Any) -> dict:
    """Pulsar's PublisherStats of one producer."""
    rate_in, throughput_in = p.interval_rates.rates
    return {
        "accessMode": AccessMode.Name(p.access_mode),
        "msgRateIn": rate_in,
        "msgThroughputIn": throughput_in,
        "averageMsgSize": throughput_in / rate_in if rate_in else 0.0,
        "chunkedMessageRate": 0.0,
        "producerId": p.producer_id,
        "supportsPartialProducer": False,
        "producerName": p.name,
        "address": p.address,
        "connectedSince": iso(p.connected_since),
        "clientVersion": p.client_version,
        "metadata": dict(p.metadata),
        "msgInCounter": p.msg_in,
        "bytesInCounter": p.bytes_in,
    }


def subscription_stats(sub: Any) -> dict:
    """Pulsar's SubscriptionStats of one subscription (persistent topic)."""
    rate_out, throughput_out, rate_redeliver, ack_rate, rate_expired = sub.interval_rates.rates
    dispatcher = sub.dispatcher
    delayed = len(getattr(dispatcher, "delayed", ()) or ())
    backlog = sub.backlog()
    consumers = [consumer_stats(c) for c in sub.consumers]
    active = getattr(dispatcher, "active", None)
    key_shared_meta = next((c.key_shared_meta for c in sub.consumers if c.key_shared_meta is not None), None)
    stats = {
        # Pulsar's default type until a consumer sets one: never null.
        "type": SubType.Name(sub.type) if sub.type is not None else "Exclusive",
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "bytesOutCounter": sub.bytes_out,
        "msgOutCounter": sub.msg_out,
        "msgRateRedeliver": rate_redeliver,
        "messageAckRate": ack_rate,
        "chunkedMessageRate": 0.0,
        "msgBacklog": backlog,
        "backlogSize": backlog_quota.bytes_after(sub.ledger, sub.cursor.mark_delete_position),
        "earliestMsgPublishTimeInBacklog": 0,
        "msgBacklogNoDelayed": max(0, backlog - delayed),
        "blockedSubscriptionOnUnackedMsgs": False,
        "msgDelayed": delayed,
        "msgInReplay": len(getattr(dispatcher, "replay", ()) or ()),
        "unackedMessages": sum(c["unackedMessages"] for c in consumers),
        "msgRateExpired": rate_expired,
        "totalMsgExpired": sub.expired,
        "lastExpireTimestamp": sub.last_expire_ms,
        "lastConsumedFlowTimestamp": sub.last_flow_ms,
        "lastConsumedTimestamp": sub.last_consumed_ms,
        "lastAckedTimestamp": sub.last_acked_ms,
        "lastMarkDeleteAdvancedTimestamp": sub.last_mark_delete_advanced_ms,
        "consumers": consumers,
        "isDurable": sub.durable,
        "isReplicated": sub.replicated,
        "allowOutOfOrderDelivery": bool(key_shared_meta is not None and key_shared_meta.allowOutOfOrderDelivery),
        "nonContiguousDeletedMessagesRanges": len(sub.cursor.individually_deleted_ranges()),
        "subscriptionProperties": {},
    }
    if active is not None:
        stats["activeConsumerName"] = active.name
    return stats


def consumer_stats(c: Any) -> dict:
    """Pulsar's ConsumerStats of one consumer."""
    rate_out, throughput_out, rate_redeliver, ack_rate = c.interval_rates.rates
    return {
        "consumerName": c.name,
        "msgRateOut": rate_out,
        "msgThroughputOut": throughput_out,
        "bytesOutCounter": c.bytes_out,
        "msgOutCounter": c.msg_out,
        "msgRateRedeliver": rate_redeliver,
        "messageAckRate": ack_rate,
        "chunkedMessageRate": 0.0,
        "availablePermits": c.permits,
        "unackedMessages": c.unacked_messages(),
        "blockedConsumerOnUnackedMsgs": False,
        "priorityLevel": c.priority_level,
        "address": c.address,
        "connectedSince": iso(c.connected_since),
        "clientVersion": c.client_version,
        "lastAckedTimestamp": c.last_acked_ms,
        "lastConsumedTimestamp": c.last_consumed_ms,
        "lastConsumedFlowTimestamp": c.last_flow_ms,
        "metadata": dict(c.metadata),
    }


async def fill_backlog_times(topic: Any, stats: dict) -> None:
    """Pulsar's ``getEarliestTimeInBacklog``: each subscription's
    ``earliestMsgPublishTimeInBacklog`` (the publish time of its first
    unacknowledged entry, one read each, usually from the tail cache; 0
    without backlog), the topic's ``earliestMsgPublishTimeInBacklogs`` (the
    oldest of them), and ``oldestBacklogMessageAgeSeconds`` /
    ``oldestBacklogMessageSubscriptionName``. An entry that cannot be read
    (trimmed meanwhile, a storage error) leaves its time at 0."""
    ml = topic.ledger
    oldest: tuple[int, str] | None = None
    for name, sub in list(topic.subscriptions.items()):
        if name not in stats["subscriptions"]:
            continue
        first = ml.next_position(sub.cursor.mark_delete_position)
        last = ml.last_confirmed
        if last is None or first > last:
            continue
        try:
            head = await ml.read_entries(first, 1)
        except StorageError:  # trimmed or unreadable meanwhile: that time stays 0, the stats still answer
            continue
        if not head:
            continue
        published = entry_info(head[0].data).publish_time
        stats["subscriptions"][name]["earliestMsgPublishTimeInBacklog"] = published
        if oldest is None or published < oldest[0]:
            oldest = (published, name)
    if oldest is not None:
        stats["earliestMsgPublishTimeInBacklogs"] = oldest[0]
        stats["oldestBacklogMessageAgeSeconds"] = max(0, int(time.time() * 1000) - oldest[0]) // 1000
        stats["oldestBacklogMessageSubscriptionName"] = oldest[1]


def topic_internal_stats(topic: Any) -> dict:
    """Pulsar's PersistentTopicInternalStats shape (admin ``/internalStats``):
    the managed ledger, its ledgers (Pulsar's ``ledgerId``, ``entries``,
    ``size``, ``offloaded``, ``timestamp``; plus Magnetar's ``state``,
    ``created`` and, once closed, ``closed``) and every cursor. Times as Pulsar writes them
    (ISO 8601 for the managed ledger's, ms for a ledger's ``timestamp``)."""
    ml = topic.ledger
    ledgers = list(ml.ledgers)
    current = ledgers[-1] if ledgers else None
    return {
        "entriesAddedCounter": ml.entry_count,
        "numberOfEntries": ml.entry_count,
        "totalSize": ml.total_size,
        "currentLedgerEntries": current.entries if current is not None else 0,
        "currentLedgerSize": current.size if current is not None else 0,
        "lastLedgerCreatedTimestamp": iso(current.created) if current is not None else "",
        "waitingCursorsCount": sum(1 for sub in topic.subscriptions.values() if sub.consumers
                                   and not sub.cursor.has_more_entries()),
        "pendingAddEntriesCount": topic.pending_appends,
        "lastConfirmedEntry": str(ml.last_confirmed) if ml.last_confirmed else "-1:-1",
        "state": "Terminated" if topic.terminated_at is not None else "LedgerOpened",
        "ledgers": [{"ledgerId": info.ledger_id, "entries": info.entries, "size": info.size,
                     "offloaded": False, "underReplicated": False, "timestamp": int(info.created * 1000),
                     "state": info.state, "created": info.created,
                     **({"closed": info.closed} if info.closed is not None else {})}
                    for info in ledgers],
        # Subscriptions' cursors and the durable ones that are not
        # subscriptions (replicators' ``pulsar.repl.<cluster>``).
        "cursors": {
            **{name: _cursor_stats(cursor, True, None) for name, cursor in ml.cursors.items()},
            **{name: _cursor_stats(sub.cursor, sub.durable, sub) for name, sub in topic.subscriptions.items()},
        },
        "schemaLedgers": [],
        "properties": dict(ml.properties),
        # Magnetar's own.
        "nextOffset": topic.next_offset,
        "topicEpoch": topic.topic_epoch,
        "idempotentProducerIds": len(topic.dedup.pids),
    }


def _cursor_stats(cursor: Any, durable: bool, sub: Any) -> dict:
    """Pulsar's CursorStats of one cursor (``sub``: its subscription, None for a replicator's)."""
    ranges = cursor.individually_deleted_ranges()
    consumers = sub.consumers if sub is not None else []
    return {
        "markDeletePosition": str(cursor.mark_delete_position),
        "readPosition": str(cursor.read_position),
        "waitingReadOp": bool(consumers) and not cursor.has_more_entries(),
        "pendingReadOps": 0,
        "messagesConsumedCounter": sub.msg_out if sub is not None else 0,
        # Pulsar's form: ranges open below, closed above ("(3:5..3:7]" = 3:6 and 3:7).
        "individuallyDeletedMessages": "[" + ",".join(f"({a.ledger_id}:{a.entry_id - 1}..{b}]"
                                                      for a, b in ranges) + "]",
        "state": "Closed" if cursor.closed else "Open",
        "active": bool(consumers),
        "numberOfEntriesSinceFirstNotAckedMessage": cursor.backlog(),
        "totalNonContiguousDeletedMessagesRange": len(ranges),
        "properties": dict(cursor.properties),
        "durable": durable,
    }
