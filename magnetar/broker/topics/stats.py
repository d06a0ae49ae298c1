"""A topic's stats in Pulsar's shapes, read from the topic without changing it."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

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
    """Pulsar's TopicStats shape (admin ``/stats``)."""
    limits = {quota.kind: quota.limit for quota in topic.backlog_quotas}
    rate_in, throughput_in, rate_out, throughput_out = topic.rates.rates(
        (topic.msg_in, topic.bytes_in, topic.msg_out, topic.bytes_out))
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
        "storageSize": topic.ledger.total_size,
        # Pulsar's names; -1: no limit. The size is backlog_quota's measure.
        "backlogSize": backlog_quota.backlog_size(topic),
        "backlogQuotaLimitSize": limits.get(backlog_quota.SIZE, -1),
        "backlogQuotaLimitTime": limits.get(backlog_quota.AGE, -1),
        "producersBlockedByBacklogQuota": topic.quota_block.kind if topic.quota_block is not None else None,
        "publishers": [
            {
                "producerId": p.producer_id,
                "producerName": p.name,
                "accessMode": AccessMode.Name(p.access_mode),
                "msgInCounter": p.msg_in,
                "bytesInCounter": p.bytes_in,
                "address": p.address,
                "connectedSince": iso(p.connected_since),
            }
            for p in topic.producers.values()
        ],
        "waitingPublishers": len(topic.waiting),
        "subscriptions": {
            name: {
                # Pulsar's default type until a consumer sets one: never null.
                "type": SubType.Name(sub.type) if sub.type is not None else "Exclusive",
                "msgBacklog": sub.backlog(),
                "msgOutCounter": sub.msg_out,
                "bytesOutCounter": sub.bytes_out,
                "isDurable": sub.durable,
                "isReplicated": sub.replicated,
                "consumers": [
                    {
                        "consumerName": c.name,
                        "availablePermits": c.permits,
                        "unackedMessages": c.unacked_messages(),
                        "msgOutCounter": c.msg_out,
                        "bytesOutCounter": c.bytes_out,
                        "address": c.address,
                        "connectedSince": iso(c.connected_since),
                    }
                    for c in sub.consumers
                ],
            }
            for name, sub in topic.subscriptions.items()
        },
        "replication": {remote: replicator.stats() for remote, replicator in topic.replicators.items()},
        "topicEpoch": topic.topic_epoch,
        "deduplicationEnabled": topic.dedup.enabled,
        # Magnetar's own: the PIP-33 controller of a replicated topic (absent otherwise).
        **({"replicatedSubscriptions": topic.marker_handler.stats()} if topic.marker_handler is not None else {}),
    }

def topic_internal_stats(topic: Any) -> dict:
    """Pulsar's PersistentTopicInternalStats shape (admin ``/internalStats``)."""
    ml = topic.ledger
    return {
        "entriesAddedCounter": ml.entry_count,
        "numberOfEntries": ml.entry_count,
        "totalSize": ml.total_size,
        "lastConfirmedEntry": str(ml.last_confirmed) if ml.last_confirmed else None,
        "nextOffset": topic.next_offset,
        "topicEpoch": topic.topic_epoch,
        # Pulsar's field names (ledgerId, entries, size), plus our state and times.
        "ledgers": [{"ledgerId": info.ledger_id, "entries": info.entries, "size": info.size,
                     "offloaded": False, "state": info.state, "created": info.created, "closed": info.closed}
                    for info in ml.ledgers],
        # Subscriptions' cursors and the durable ones that are not
        # subscriptions (replicators' ``pulsar.repl.<cluster>``).
        "cursors": {
            **{name: _cursor_stats(cursor, True) for name, cursor in ml.cursors.items()},
            **{name: _cursor_stats(sub.cursor, sub.durable) for name, sub in topic.subscriptions.items()},
        },
        "properties": dict(ml.properties),
        "state": "Terminated" if topic.terminated_at is not None else "LedgerOpened",
        "idempotentProducerIds": len(topic.dedup.pids),
    }


def _cursor_stats(cursor: Any, durable: bool) -> dict:
    return {
        "markDeletePosition": str(cursor.mark_delete_position),
        "readPosition": str(cursor.read_position),
        "individuallyDeletedMessages": str([(str(a), str(b)) for a, b in cursor.individually_deleted_ranges()]),
        "durable": durable,
    }
