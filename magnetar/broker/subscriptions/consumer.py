"""A consumer attached to a subscription: its permits and unacknowledged entries.

The broker counts permits in messages (a batch entry of N messages costs N),
as the client's FLOW does. ``pending`` maps each delivered, unacknowledged
entry to its message count so a closing consumer's entries can be handed to
others.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from magnetar.storage import Entry, Position

from .views import SubscriptionView


@dataclass(eq=False)
class Consumer:
    consumer_id: int
    name: str
    subscription: SubscriptionView
    priority_level: int = 0
    #: Writes entries to the client: callable(consumer, entries, redelivery_counts).
    deliver: Callable[["Consumer", list[Entry], list[int]], None] | None = None
    #: True while the connection's write buffer is full: skip this consumer.
    writable: Callable[[], bool] = lambda: True
    #: Tells the client the consumer must reconnect (seek, unload); with a
    #: URL, to that broker without a lookup (the topic moved there).
    disconnect: Callable[..., None] = lambda url=None: None
    #: Tells a failover consumer whether it is the active one.
    active_change: Callable[[bool], None] = lambda active: None
    permits: int = 0
    #: Key_Shared: the consumer's KeySharedMeta (mode, sticky ranges, out-of-order), None if not given.
    key_shared_meta: Any = None
    #: Reads the topic's compacted view first (Exclusive/Failover subscriptions and readers).
    read_compacted: bool = False
    #: The partition index of the topic it reads (-1: not a partition).
    partition: int = -1
    pending: dict[Position, int] = field(default_factory=dict)
    address: str = ""
    connected_since: float = field(default_factory=time.time)
    msg_out: int = 0
    bytes_out: int = 0
    closed: bool = False

    def can_receive(self) -> bool:
        return not self.closed and self.permits > 0 and self.writable()

    def unacked_messages(self) -> int:
        return sum(self.pending.values())
