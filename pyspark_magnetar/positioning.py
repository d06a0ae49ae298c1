"""Where to start reading so that offset ``start`` is reached quickly.

The broker finds the entry holding an offset itself: a SEEK with Magnetar's
``magnetar_offset`` is a binary search over the topic's entries, in any
ledger. A one-message probe reader seeks there (``seek_offset``) and reads
the message at ``start``; the answer is that message's whole entry, so the
scan that follows skips at most the few batch members below ``start``. Cost:
one short-lived reader, one seek, one message, wherever ``start`` lies.

Only offsets the broker reports are trusted: the answer is always an entry
whose first offset was *seen* to be at or below ``start`` (the scan that
follows skips up to ``start`` and checks every offset). Whenever that cannot
be established (the probe fails or times out, the broker refuses the seek,
or the first message it has is past ``start``: retention removed ``start``)
the answer is "earliest": a scan from the first retained message, slower but
still correct, and the one that reports the missing offsets.
"""
from __future__ import annotations

import logging

from magnetar.client import AsyncClient, AsyncReader, MessageId
from magnetar.client.errors import PulsarError

from .offsets import TopicPartition

log = logging.getLogger(__name__)

#: Below this offset, scanning from the earliest message is cheaper than a probe.
MIN_OFFSET_TO_POSITION = 1_000
#: A probe waits this long for its one message (the scan's range is written).
PROBE_TIMEOUT_MS = 10_000


async def start_position(client: AsyncClient, tp: TopicPartition, start: int) -> MessageId:
    """A message id to start a scan for offset ``start`` from (inclusive):
    the entry holding ``start``, or ``MessageId.earliest``. Never raises
    for broker trouble (falls back)."""
    if start < MIN_OFFSET_TO_POSITION:
        return MessageId.earliest
    try:
        probe = await client.create_reader(tp.name, MessageId.latest, receiver_queue_size=1)
    except PulsarError as exc:
        log.info("%s: no probe reader (%s); scanning from the earliest message", tp, exc)
        return MessageId.earliest
    try:
        return await _entry_of(probe, tp, start)
    except PulsarError as exc:
        log.info("%s: positioning for offset %d failed (%s); scanning from the earliest message", tp, start, exc)
        return MessageId.earliest
    finally:
        try:
            await probe.close()
        except PulsarError:
            pass


async def _entry_of(probe: AsyncReader, tp: TopicPartition, start: int) -> MessageId:
    """The entry holding ``start`` as the broker's offset seek finds it, or
    earliest when what it delivers does not prove its first offset <= start."""
    await probe.seek_offset(start)
    msg = await probe.read_next(PROBE_TIMEOUT_MS)
    mid = msg.message_id()
    if msg.offset is None:
        return MessageId.earliest  # no broker entry metadata: nothing to trust
    entry_first = msg.offset - max(mid.batch_index(), 0)
    if entry_first > start:
        log.info("%s: the first message at or after offset %d is %d; scanning from the earliest message",
                 tp, start, msg.offset)
        return MessageId.earliest
    return MessageId(mid.ledger_id(), mid.entry_id(), -1, tp.partition)
