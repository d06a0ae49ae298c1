"""Message TTL: a periodic task that expires old backlog.

Every ``interval_s`` the task (a :mod:`.sweep`) looks at each loaded topic whose namespace sets
``message_ttl_in_seconds`` and moves each durable subscription's cursor past
the entries published longer ago than the TTL (:func:`.cursor_ops.expire`),
as if they had been acknowledged. Consumed ledgers then go the usual way
(trimming, under the namespace's retention).

Readers (non-durable subscriptions) are left alone: they chose their position
and hold no data back. A failure on one topic is logged and the others are
still checked; the task never dies of one.
"""
from __future__ import annotations

import asyncio
import logging

from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.namespaces.policies import message_ttl_s
from magnetar.broker.namespaces.applied import applied_policies

from magnetar.metadata import MetadataStore

from .sweep import start_sweep, stop_sweep
from .views import ServedTopics

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
        for topic in list(self.service.topics.values()):
            if topic.closed:
                continue
            # The topic's own TTL, else its namespace's (one small read each round).
            ttl = message_ttl_s(await applied_policies(self.store, topic.name))
            if ttl is None:
                continue
            for sub in list(topic.subscriptions.values()):
                if not sub.durable:
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
