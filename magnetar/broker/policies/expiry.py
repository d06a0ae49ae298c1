"""Message TTL: a periodic task that expires old backlog.

Every ``interval_s`` the task (a :mod:`.sweep`) looks at each loaded topic
with a ``message_ttl_in_seconds`` (its own, else its namespace's) and moves
each durable subscription's cursor past the entries published longer ago
than the TTL (:func:`.cursor_ops.expire`), as if they had been acknowledged. Consumed ledgers then go the usual way
(trimming, under the namespace's retention).

Readers (non-durable subscriptions) are left alone: they chose their position
and hold no data back. A failure on one topic is logged and the others are
still checked; the task never dies of one.

**Metadata reads.** A round reads the policies afresh (a change is applied
at the next round), a namespace at a time
(:func:`~magnetar.broker.namespaces.applied.applied_by_namespace`): its
policies once and its topics' own policies in one range read (or a read
each for up to four topics). At 10,000 loaded topics in 2 namespaces a
round costs 4 reads, where a read of both documents per topic cost 20,000
(``tests/unit/broker/test_round_reads.py``). A namespace whose read fails is
logged and its topics wait for the next round; the others go on.
"""
from __future__ import annotations

import asyncio
import logging

from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.namespaces.policies import message_ttl_s
from magnetar.broker.namespaces.applied import applied_by_namespace

from magnetar.metadata import MetadataStore

from .sweep import start_sweep, stop_sweep
from .views import PolicedTopic, ServedTopics

log = logging.getLogger(__name__)


class MessageExpiry:
    """Expires the backlog of ``service``'s loaded topics by the TTL their
    policies in ``store`` give."""

    def __init__(self, service: ServedTopics, store: MetadataStore, interval_s: float) -> None:
        self.service = service
        self.store = store
        self.interval_s = interval_s
        self._task: asyncio.Task | None = None

    def start(self) -> "MessageExpiry":
        if self._task is None:
            self._task = start_sweep(self.interval_s, self.check_all, "message expiry")
        return self

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_sweep(task)

    async def check_all(self) -> int:
        """One round over every loaded topic; returns the entries expired."""
        total = 0
        topics = {topic.name: topic for topic in list(self.service.topics.values()) if not topic.closed}
        # The policies of a namespace's topics in a few reads (applied.py), read afresh every round.
        async for namespace, applied in applied_by_namespace(self.store, topics):
            if isinstance(applied, Exception):
                log.warning("cannot read the policies of namespace %s: its topics wait for the next round: %s",
                            namespace, applied)
                continue
            for name, policies in applied.items():
                ttl = message_ttl_s(policies)  # the topic's own TTL, else its namespace's
                if ttl is not None:
                    total += await self._expire(topics[name], ttl)
        return total

    @staticmethod
    async def _expire(topic: PolicedTopic, ttl: int) -> int:
        total = 0
        for sub in list(topic.subscriptions.values()):
            if not sub.durable or topic.closed:
                continue
            try:
                n = await cursor_ops.expire(sub, ttl)
            except Exception as exc:  # storage trouble on one topic must not stop the round
                log.warning("cannot expire messages of %s/%s: %s", topic.name, sub.name, exc)
                continue
            if n:
                log.info("expired %d entries of %s subscription %s (TTL %d s)", n, topic.name, sub.name, ttl)
                total += n
        return total
