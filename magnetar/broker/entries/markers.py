"""Markers: entries the brokers write into a topic for themselves.

A marker is an entry whose MessageMetadata has ``marker_type`` (Pulsar's
field 20 and values, ``pb.MarkerType``); its payload is the marker's own
message. Replicated subscriptions (PIP-33) are built on them: snapshot
requests and responses and subscription updates travel between clusters
inline with the data, through the replicators; completed snapshots stay in
the local topic.

Markers are never dispatched to a consumer: dispatchers acknowledge them as
they read them (a consumer's client would take one for a message), and the
last message id a client asks for is that of the last non-marker entry.
"""
from __future__ import annotations

import time

from magnetar.protocol import pb

#: The producer name markers carry (Pulsar's).
MARKER_PRODUCER = "pulsar.marker"

#: Markers that stay in the cluster that wrote them.
SERVER_ONLY = frozenset({pb.REPLICATED_SUBSCRIPTION_SNAPSHOT})

#: Markers a replicator forwards (within their ``replicate_to``).
REPLICATED = frozenset({pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST, pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE,
                        pb.REPLICATED_SUBSCRIPTION_UPDATE})


def marker_metadata(marker_type: int, replicate_to: list[str] | tuple[str, ...] = ()) -> bytes:
    """The MessageMetadata of a new marker entry, serialized."""
    md = pb.MessageMetadata(producer_name=MARKER_PRODUCER, sequence_id=0,
                            publish_time=time.time_ns() // 1_000_000, marker_type=marker_type)
    md.replicate_to.extend(replicate_to)
    return md.SerializeToString()


def is_marker(metadata: pb.MessageMetadata) -> bool:
    return metadata.HasField("marker_type")
