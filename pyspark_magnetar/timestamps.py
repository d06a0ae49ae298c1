"""Offsets by publish time: ``startingOffsetsByTimestamp`` and friends.

A time ``t`` (ms since the epoch) resolves to the offset of the partition's
first message published at or after ``t``, or to its next offset when every
message is older (the Kafka source's rule). Publish times are the
producers', so a topic written by producers with skewed clocks resolves as
the broker's publish-time seek finds it (a binary search that assumes
times grow with offsets, as Pulsar's does).

Cost, on the driver, per partition: a one-message look at the newest
message (is anything at or after ``t`` at all?) and, if so, a publish-time
seek and one message. Nothing waits for a message that does not exist.
"""
from __future__ import annotations

from magnetar.client import AsyncClient, MessageId

from .errors import MagnetarSparkError
from .offsets import TopicPartition
from .positioning import PROBE_TIMEOUT_MS


async def offset_at_time(client: AsyncClient, tp: TopicPartition, time_ms: int, next_off: int) -> int:
    """The offset of the first message of ``tp`` published at or after
    ``time_ms``; ``next_off`` (the caller's fresh next offset) if none is.

    Raises MagnetarSparkError when the broker gives no offsets, and the
    client's errors (Timeout, ConnectError, ...)."""
    if next_off == 0:
        return 0
    reader = await client.create_reader(tp.name, MessageId.latest, receiver_queue_size=1)
    try:
        await reader.seek_offset(next_off - 1)
        newest = await reader.read_next(PROBE_TIMEOUT_MS)
        if newest.publish_timestamp() < time_ms:
            return next_off
        await reader.seek(time_ms)
        msg = await reader.read_next(PROBE_TIMEOUT_MS)
        if msg.offset is None:
            raise MagnetarSparkError(f"{tp}: the broker sent no offsets (broker entry metadata); "
                                     "the Spark connector needs a Magnetar broker")
        return min(msg.offset, next_off)
    finally:
        await reader.close()
