"""How a topic sees the replicators that copy it to other regions.

Replicators are built above the broker (``magnetar.replication``); a topic
only needs to wake them when entries arrive, stop them when it closes or
moves, and show them in its stats. Each keeps a durable cursor on the topic's
managed ledger named ``pulsar.repl.<remote cluster>`` (Pulsar's name): that
cursor holds entries back from trimming until they reached the remote, and is
not a subscription (never listed, never dispatched to a consumer).
"""
from __future__ import annotations

from typing import Protocol

#: Prefix of replicator cursors' names (Pulsar's ``pulsar.repl.``).
REPLICATOR_CURSOR_PREFIX = "pulsar.repl."


def is_replicator_cursor(name: str) -> bool:
    return name.startswith(REPLICATOR_CURSOR_PREFIX)


def replicator_cursor(remote_cluster: str) -> str:
    return REPLICATOR_CURSOR_PREFIX + remote_cluster


class ReplicatorView(Protocol):
    def on_new_entries(self) -> None:
        """Entries were appended: read them (must not block or raise)."""

    def stop(self) -> None:
        """The topic closes or moves: stop at once (the cursor stays)."""

    def stats(self) -> dict:
        """Pulsar's ReplicatorStats fields (``replicationBacklog``, ``connected``...)."""

    def delay_seconds(self) -> float:
        """Age of the oldest entry the remote does not have yet (0: none waits)."""


#: Message property a replicated entry carries: its position in the source
#: cluster's topic, ``"<ledger id>:<entry id>"`` (Pulsar's name and format).
SOURCE_POSITION_PROPERTY = "__MSG_PROP_REPL_SOURCE_POSITION"


def source_sequence(ledger_id: int, entry_id: int) -> int:
    """The sequence id a replicator sends a source entry with.

    Ledger ids only grow (allocated cluster-wide) and a ledger rolls over
    long before 2**32 entries, so the sequence grows with the source
    position: the remote's deduplication, keyed by the replicator's
    producer name, drops whatever it already stored.
    """
    return (ledger_id << 32) | entry_id


def replicated_sequence(replicated_from: str, properties) -> tuple[str, int] | None:
    """For a stored entry that came from another cluster: the replicator's
    producer name and the sequence it was sent with, read back from the
    entry (deduplication rebuilds its tables from the log this way).
    ``properties`` are the entry's MessageMetadata properties."""
    for kv in properties:
        if kv.key == SOURCE_POSITION_PROPERTY:
            ledger, _, entry = kv.value.partition(":")
            try:
                return replicator_cursor(replicated_from), source_sequence(int(ledger), int(entry))
            except ValueError:
                return None
    return None


class MarkerHandler(Protocol):
    """A replicated topic's replicated-subscription controller (PIP-33), as
    the topic sees it (``magnetar.replication.subscriptions``)."""

    def on_replicated_marker(self, position, metadata, payload: bytes) -> None:
        """A marker from another cluster was stored at ``position``."""

    def subscription_moved(self, name: str, snapshot) -> None:
        """Replicated subscription ``name``'s mark-delete passed ``snapshot``."""

    def stop(self) -> None:
        """The topic closes or moves."""

    def stats(self) -> dict:
        """Counters for the topic's stats (snapshots, updates sent and applied)."""
