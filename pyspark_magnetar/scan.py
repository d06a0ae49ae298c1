"""Reading the messages with offsets in ``[start, end)`` of one partition.

A scan starts a reader at an entry known to lie at or before ``start``
(:mod:`.positioning`: the entry holding ``start``, found by the broker's
seek by offset, else the earliest retained message) and *skips* messages
below ``start``; the offsets come from the broker entry metadata on every
message (``Message.offset``). Cost: ``end - start`` plus the batch members
of the starting entry below ``start`` (plus one probe; the whole retained
prefix only when positioning fell back to earliest).

Completeness is checked, not assumed: offsets are dense, so the scan expects
``start, start+1, ...`` and treats a jump, or silence for ``pollTimeoutMs``
before ``end``, as data loss (an error, or a warning with
``failOnDataLoss=false``).
"""
from __future__ import annotations

import logging

from magnetar.client import AsyncClient, AsyncReader, Message
from magnetar.client.errors import Timeout

from .errors import DataLossError, MagnetarSparkError
from .offsets import TopicPartition
from .positioning import start_position

log = logging.getLogger(__name__)

RECEIVER_QUEUE_SIZE = 4000


class RangeScanner:
    """Yields the messages of ``tp`` with ``start <= offset < end`` in offset
    order, in chunks. Open with :meth:`open`, then call :meth:`next_chunk`
    until it returns an empty list, then :meth:`close`.

    Failure modes: DataLossError (offsets missing, ``fail_on_data_loss``);
    MagnetarSparkError if the broker sends no offsets (not a Magnetar broker,
    or broker entry metadata disabled); the client's errors (TopicNotFound,
    ConnectError after the client gave up reconnecting, ...).
    """

    def __init__(self, reader: AsyncReader, tp: TopicPartition, start: int, end: int, *,
                 poll_timeout_ms: int, fail_on_data_loss: bool) -> None:
        self._reader = reader
        self.tp = tp
        self.end = end
        self.expected = start  # the next offset the range needs
        self._poll_ms = poll_timeout_ms
        self._strict = fail_on_data_loss
        self.skipped = 0  # messages read below start: the starting entry's members before it

    @classmethod
    async def open(cls, client: AsyncClient, tp: TopicPartition, start: int, end: int, *,
                   poll_timeout_ms: int, fail_on_data_loss: bool) -> "RangeScanner":
        first = await start_position(client, tp, start)
        reader = await client.create_reader(tp.name, first, start_message_id_inclusive=True,
                                            receiver_queue_size=RECEIVER_QUEUE_SIZE)
        return cls(reader, tp, start, end, poll_timeout_ms=poll_timeout_ms, fail_on_data_loss=fail_on_data_loss)

    async def next_chunk(self, max_rows: int) -> list[Message]:
        """Up to ``max_rows`` next messages of the range; ``[]`` once it is complete."""
        out: list[Message] = []
        while self.expected < self.end and len(out) < max_rows:
            try:
                msg = await self._reader.read_next(self._poll_ms)
            except Timeout:
                self._lost(self.expected, self.end,
                           f"no message arrived within pollTimeoutMs={self._poll_ms} ms")
                self.expected = self.end
                break
            offset = msg.offset
            if offset is None:
                raise MagnetarSparkError(
                    f"{self.tp}: the broker sent a message without an offset (broker entry metadata); "
                    "the Spark connector needs a Magnetar broker")
            if offset < self.expected:
                self.skipped += 1
                continue
            if offset > self.expected:
                self._lost(self.expected, min(offset, self.end),
                           f"the next message the broker had was offset {offset}")
            if offset >= self.end:
                self.expected = self.end
                break
            out.append(msg)
            self.expected = offset + 1
        return out

    def _lost(self, first: int, stop: int, why: str) -> None:
        text = (f"{self.tp}: offsets {first}..{stop - 1} are missing ({why}); they were removed by retention, "
                "the topic was deleted and recreated, or the broker is unreachable")
        if self._strict:
            raise DataLossError(text + ". Set failOnDataLoss=false to skip missing offsets.")
        log.warning("%s; skipping them (failOnDataLoss=false)", text)

    async def close(self) -> None:
        try:
            await self._reader.close()
        except Exception:  # the reader is non-durable: nothing is lost if close fails
            log.debug("closing the reader of %s failed", self.tp, exc_info=True)
