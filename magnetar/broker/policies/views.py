"""What the policy room needs from the topics and the service it polices.

Quotas and expiry act on loaded topics, which live in the room above
(``topics.topic.Topic``, served by ``server.service.BrokerService``); the
topic calls the quota check on its own admission path. These protocols name
the members used here, so this room never imports the rooms above it.
"""
from __future__ import annotations

from typing import Any, Protocol

from magnetar.broker.namespaces.policies import BacklogQuota
from magnetar.broker.subscriptions.subscription import Subscription
from magnetar.broker.topic_name import TopicName
from magnetar.storage import ManagedLedger


class PolicedTopic(Protocol):
    """A loaded topic as quotas and expiry see it."""

    name: TopicName
    ledger: ManagedLedger
    closed: bool
    subscriptions: dict[str, Subscription]
    #: Attached producers by name.
    producers: dict[str, Any]
    backlog_quotas: tuple[BacklogQuota, ...]
    #: The exceeded quota that blocks producers now, or None.
    quota_block: BacklogQuota | None

    def close_producer(self, producer: Any) -> None:
        """Detach ``producer`` and tell its client (CLOSE_PRODUCER): it reconnects."""

    async def check_backlog_quota(self) -> BacklogQuota | None: ...


class ServedTopics(Protocol):
    """The broker's loaded topics."""

    topics: dict[str, PolicedTopic]
