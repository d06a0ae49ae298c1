"""Inactive and idle topics: deleted (Pulsar's brokerDeleteInactiveTopics*
settings) or unloaded from memory, so that memory follows active topics.

Every ``broker_delete_inactive_topics_frequency_s`` one round (a
:mod:`.sweep`) looks at each
loaded topic. A topic is *idle* while it has no producer, no consumer, no
producer waiting for exclusive access and no replicator, and no message went
in or out since the round before; it has been idle since the first round
that saw it so (the clock is this broker's: a load starts it afresh).

- Deleted, when ``broker_delete_inactive_topics_enabled``, once idle for
  ``broker_delete_inactive_topics_max_inactive_duration_s`` (0: the
  frequency), and, by ``broker_delete_inactive_topics_mode``:
  ``delete_when_no_subscriptions``: it has no subscription;
  ``delete_when_subscriptions_caught_up``: no subscription has a backlog.
  Partitions of partitioned topics are never deleted this way (the
  partitioned topic's metadata would name a missing partition), nor are
  Pulsar's system topics (``__``-prefixed local names).
- Otherwise unloaded once idle for ``topic_idle_unload_s`` (0: never): its
  state is on disk (cursors, producer sequences, the log) and its next use
  loads it again.

Only loaded topics are looked at: a stored topic nobody used since the
broker started is neither deleted nor in memory. A failure on one topic is
logged; the round goes on. The round yields to the event loop every
:data:`SLICE_TOPICS` topics: in one piece it held the loop for the whole
pass over every loaded topic (about 1 us a topic, 10 ms at 10,000).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.topic_name import TopicName

from .sweep import start_sweep, stop_sweep

log = logging.getLogger(__name__)

#: Topics looked at between two yields to the event loop.
SLICE_TOPICS = 500

NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
CAUGHT_UP = "delete_when_subscriptions_caught_up"


class IdleTopic(Protocol):
    """A loaded topic as this module sees it (``topics.topic.Topic``)."""

    name: TopicName
    closed: bool
    producers: dict[str, Any]
    #: Producers waiting for exclusive access.
    waiting: Any
    #: Subscriptions by name; each has ``consumers`` and ``backlog()``.
    subscriptions: dict[str, Any]
    replicators: dict[str, Any]
    msg_in: int
    msg_out: int


class TopicKeeper(Protocol):
    """The service that loaded the topics (``server.service.BrokerService``)."""

    topics: dict[str, IdleTopic]

    async def unload(self, topic: IdleTopic) -> None: ...

    async def delete_topic(self, name: TopicName) -> None: ...


class InactiveTopics:
    """The periodic round (:meth:`start` / :meth:`stop`) and its memory of
    when each loaded topic became idle."""

    def __init__(self, service: TopicKeeper, config: BrokerConfig) -> None:
        self.service = service
        self.interval_s = config.broker_delete_inactive_topics_frequency_s
        self.delete_enabled = config.broker_delete_inactive_topics_enabled
        self.delete_after_s = config.broker_delete_inactive_topics_max_inactive_duration_s or self.interval_s
        self.mode = config.broker_delete_inactive_topics_mode
        self.unload_after_s = config.topic_idle_unload_s
        #: topic name -> (idle since, msg_in, msg_out when last seen).
        self._idle: dict[str, tuple[float, int, int]] = {}
        self._task: asyncio.Task | None = None

    def start(self) -> "InactiveTopics":
        if self._task is None and (self.delete_enabled or self.unload_after_s > 0):
            self._task = start_sweep(self.interval_s, self.round, "inactive topics")
        return self

    async def stop(self) -> None:
        task, self._task = self._task, None
        await stop_sweep(task)

    async def round(self, now: float | None = None) -> tuple[list[str], list[str]]:
        """Look at every loaded topic once; returns (deleted, unloaded) names."""
        now = asyncio.get_running_loop().time() if now is None else now
        deleted: list[str] = []
        unloaded: list[str] = []
        seen = set()
        for i, (key, topic) in enumerate(list(self.service.topics.items())):
            if i and not i % SLICE_TOPICS:
                await asyncio.sleep(0)  # the traffic runs between two slices
            seen.add(key)
            idle_for = self._idle_for(key, topic, now)
            if idle_for is None:
                continue
            try:
                if self.delete_enabled and idle_for >= self.delete_after_s and self._deletable(topic):
                    log.info("deleting inactive topic %s (idle %.0f s, %s)", topic.name, idle_for, self.mode)
                    await self.service.delete_topic(topic.name)
                    deleted.append(key)
                elif 0 < self.unload_after_s <= idle_for:
                    log.info("unloading idle topic %s (idle %.0f s)", topic.name, idle_for)
                    await self.service.unload(topic)
                    unloaded.append(key)
                else:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("inactive topic %s: %s", topic.name, exc)
                continue
            self._idle.pop(key, None)
        for gone in set(self._idle) - seen:
            del self._idle[gone]
        return deleted, unloaded

    def _idle_for(self, key: str, topic: IdleTopic, now: float) -> float | None:
        """Seconds ``topic`` has been idle, None while it is in use."""
        if topic.closed or not _unattended(topic):
            self._idle.pop(key, None)
            return None
        since, msg_in, msg_out = self._idle.get(key, (now, topic.msg_in, topic.msg_out))
        if (msg_in, msg_out) != (topic.msg_in, topic.msg_out):
            since = now  # traffic since the last round
        self._idle[key] = (since, topic.msg_in, topic.msg_out)
        return now - since

    def _deletable(self, topic: IdleTopic) -> bool:
        name = topic.name
        if name.partition_index >= 0 or name.local.startswith("__"):
            return False
        if self.mode == NO_SUBSCRIPTIONS:
            return not topic.subscriptions
        return all(sub.backlog() == 0 for sub in topic.subscriptions.values())


def _unattended(topic: IdleTopic) -> bool:
    """No producer, consumer, waiting producer or replicator."""
    return not (topic.producers or topic.waiting or topic.replicators
                or any(sub.consumers for sub in topic.subscriptions.values()))
