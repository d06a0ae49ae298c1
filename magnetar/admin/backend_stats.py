"""The storage backend's counters, for the collectors that export them."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from magnetar.broker.server.server import Broker
    from magnetar.storage import BackendStats


def backend_stats(broker: "Broker", kind: str) -> "BackendStats | None":
    """The broker's backend ``stats()`` when the backend is of ``kind``
    ("file", "object"); None before the broker has started its storage, or
    on another backend (each collector shows only its own series)."""
    factory = broker.factory
    if factory is None:
        return None
    stats = factory.backend.stats()
    return stats if stats.kind == kind else None
