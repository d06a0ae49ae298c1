"""Where to start reading so that offset ``start`` is reached quickly.

The broker positions readers by message id (ledger, entry), not by offset.
Within one ledger, entry ids are dense and offsets grow with them, so the
entry holding ``start`` can be found by bisection over entry ids of the
topic's current (last) ledger: each probe seeks a small reader to an entry
and reads its first message's offset (``Message.offset``). About
log2(entries in the ledger) probes, each a seek and one entry.

Only offsets the broker reports are trusted: the answer is always an entry
whose first offset was *seen* to be at or below ``start`` (the scan that
follows skips up to ``start`` and checks every offset). Whenever that cannot
be established cheaply (``start`` lies in an older ledger, the topic is
empty, a probe times out or lands elsewhere) the answer is "earliest": a
full scan, slower but still correct.
"""
from __future__ import annotations

import logging

from magnetar.client import AsyncClient, AsyncReader, MessageId
from magnetar.client.errors import PulsarError

from .offsets import TopicPartition

log = logging.getLogger(__name__)

#: Below this offset, scanning from the earliest message is cheaper than probing.
MIN_OFFSET_TO_POSITION = 20_000
#: A probe waits this long for its one message (entries it seeks to exist).
PROBE_TIMEOUT_MS = 10_000


async def start_position(client: AsyncClient, tp: TopicPartition, start: int) -> MessageId:
    """A message id to start a scan for offset ``start`` from (inclusive):
    an entry of the current ledger at or before ``start``, or
    ``MessageId.earliest``. Never raises for broker trouble (falls back)."""
    if start < MIN_OFFSET_TO_POSITION:
        return MessageId.earliest
    try:
        probe = await client.create_reader(tp.name, MessageId.earliest, start_message_id_inclusive=True,
                                           receiver_queue_size=1)
    except PulsarError as exc:
        log.info("%s: no probe reader (%s); scanning from the earliest message", tp, exc)
        return MessageId.earliest
    try:
        return await _bisect(probe, tp, start)
    except PulsarError as exc:
        log.info("%s: positioning for offset %d failed (%s); scanning from the earliest message", tp, start, exc)
        return MessageId.earliest
    finally:
        try:
            await probe.close()
        except PulsarError:
            pass


async def _bisect(probe: AsyncReader, tp: TopicPartition, start: int) -> MessageId:
    last = await probe.get_last_message_id()
    ledger, last_entry = last.ledger_id(), last.entry_id()
    if ledger < 0 or last_entry < 0:
        return MessageId.earliest

    async def first_offset(entry: int) -> int | None:
        """Offset of the entry's first message; None if the broker delivered another entry."""
        await probe.seek(MessageId(ledger, entry, -1, tp.partition))
        msg = await probe.read_next(PROBE_TIMEOUT_MS)
        if msg.message_id().entry_key != (ledger, entry) or msg.offset is None:
            return None
        return msg.offset - max(msg.message_id().batch_index(), 0)

    first = await first_offset(0)
    if first is None or first > start:
        return MessageId.earliest  # start is in an older ledger (or unknown): scan
    lo, hi = 0, last_entry  # invariant: first_offset(lo) <= start
    while lo < hi:
        mid = (lo + hi + 1) // 2
        offset = await first_offset(mid)
        if offset is not None and offset <= start:
            lo = mid
        else:
            hi = mid - 1
    return MessageId(ledger, lo, -1, tp.partition)
