"""AsyncProducer: publishes to one topic (or one partition of it).

Messages are queued in send order as *entries* (single messages, or batches
when batching is on) and written to the broker at once when connected.
Receipts come back in the same order and complete each message's future with
its MessageId. After a reconnect the producer registers again under the same
id and name (echoing the topic epoch it was given) and rewrites every entry
still waiting for a receipt, in order.

Failure modes of a send: Timeout when no receipt arrived within
``send_timeout_millis`` (as in Pulsar, all queued messages fail together);
ProducerQueueIsFull when ``max_pending_messages`` are queued and
``block_if_queue_full`` is off; ProducerFenced / TopicTerminated end the
producer; ExpectedOffsetMismatch fails a conditional send alone.

Extension points, not implemented yet: idempotent producers (a leased pid
written as MessageMetadata.magnetar_pid/generation/sequence in
:meth:`_seal_entry`), chunking.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from magnetar.protocol import ServerError, Type, command, pb
from magnetar.protocol.frames import encode_send

from .batch_builder import BatchBuilder, Entry, single_entry
from .connection import BrokerConnection
from .enums import CompressionType, ProducerAccessMode
from .errors import (AlreadyClosed, ExpectedOffsetMismatch, InvalidConfiguration, MessageTooBig,
                     ProducerQueueIsFull, PulsarError, Result, Timeout, from_server_error)
from .link import BrokerLink, LinkState
from .message_id import MessageId
from .topic import partition_index

log = logging.getLogger(__name__)

SendCallback = Callable[[Result, "MessageId | None"], Any]

#: SEND_ERROR codes after which the producer cannot go on.
_FATAL_SEND_ERRORS = frozenset({
    ServerError.ProducerFenced, ServerError.TopicTerminatedError, ServerError.NotAllowedError,
    ServerError.AuthorizationError, ServerError.AuthenticationError,
})


@dataclass(slots=True)
class _Queued:
    """An entry waiting for its receipt, with the frame that carries it."""

    entry: Entry
    frame: bytes
    queued_at: float


class AsyncProducer(BrokerLink):
    kind = "producer"

    def __init__(
        self, client, topic: str, producer_id: int, *, producer_name: str | None = None,
        initial_sequence_id: int | None = None, send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE, max_pending_messages: int = 1000,
        block_if_queue_full: bool = False, batching_enabled: bool = False,
        batching_max_messages: int = 1000, batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10, access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(client, topic)
        if max_pending_messages < 1:
            raise InvalidConfiguration("max_pending_messages must be >= 1")
        self.producer_id = producer_id
        self._name = producer_name
        self._user_named = producer_name is not None
        self._initial_sequence_id = initial_sequence_id
        self._next_sequence_id = 0 if initial_sequence_id is None else initial_sequence_id + 1
        self._last_sequence_id = -1 if initial_sequence_id is None else initial_sequence_id
        self._send_timeout = send_timeout_millis / 1000 if send_timeout_millis else None
        self._compression = int(compression_type)
        self._max_pending = max_pending_messages
        self._block_if_full = block_if_queue_full
        self._batch = (BatchBuilder(batching_max_messages, batching_max_allowed_size_in_bytes)
                       if batching_enabled else None)
        self._batch_delay = batching_max_publish_delay_ms / 1000
        self._access_mode = ProducerAccessMode(access_mode)
        self._metadata = dict(properties or {})
        self._partition = partition_index(topic)
        self._topic_epoch: int | None = None
        self._epoch = 0
        self._queue: deque[_Queued] = deque()
        self._queued_messages = 0  # in _queue and in the open batch
        self._space = asyncio.Event()
        self._batch_timer: asyncio.TimerHandle | None = None
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop()

    # -- accessors ------------------------------------------------------------------
    def producer_name(self) -> str:
        return self._name or ""

    def last_sequence_id(self) -> int:
        """The highest sequence id the broker acknowledged (-1: none yet)."""
        return self._last_sequence_id

    def topic_epoch(self) -> int | None:
        return self._topic_epoch

    # -- registration -----------------------------------------------------------------
    async def _register(self, conn: BrokerConnection, timeout: float) -> None:
        conn.attach_producer(self.producer_id, self)
        cmd = command(
            Type.PRODUCER, topic=self._topic, producer_id=self.producer_id,
            request_id=self._client.new_request_id(), producer_name=self._name,
            user_provided_producer_name=self._user_named, epoch=self._epoch,
            producer_access_mode=int(self._access_mode), topic_epoch=self._topic_epoch,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in self._metadata.items()],
        )
        self._epoch += 1
        reply = (await conn.request(cmd, timeout)).producer_success
        if self._name is None:
            self._name = reply.producer_name
        if reply.HasField("topic_epoch"):
            self._topic_epoch = reply.topic_epoch
        if self.registrations == 0 and self._initial_sequence_id is None and reply.last_sequence_id >= 0:
            # The broker knows this producer name's history (deduplication):
            # continue after it.
            self._last_sequence_id = reply.last_sequence_id
            self._next_sequence_id = reply.last_sequence_id + 1

    def _detach(self, conn: BrokerConnection) -> None:
        conn.detach_producer(self.producer_id, self)

    def _on_link_up(self) -> None:
        conn = self.conn
        for queued in self._queue:
            conn.send_raw_frame(queued.frame)

    def _on_fatal(self, exc: PulsarError) -> None:
        self._fail_all(exc)

    # -- sending -------------------------------------------------------------------
    def send_nowait(
        self, content: bytes, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
        ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
        sequence_id: int | None = None, expected_offset: int | None = None,
    ) -> asyncio.Future:
        """Queue a message; return a future of its MessageId.

        Raises AlreadyClosed / the producer's fatal error, ProducerQueueIsFull,
        MessageTooBig, at once; the future fails with the send's error.
        """
        self._check_open()
        if self._queued_messages >= self._max_pending:
            raise ProducerQueueIsFull(f"{self._queued_messages} messages pending on {self._topic}")
        if not isinstance(content, (bytes, bytearray, memoryview)):
            raise TypeError(f"content must be bytes, not {type(content).__name__}")
        if self.conn is not None and len(content) > self.conn.max_message_size:
            raise MessageTooBig(f"{len(content)} bytes > max message size {self.conn.max_message_size}")
        if sequence_id is None:
            sequence_id = self._next_sequence_id
        self._next_sequence_id = max(self._next_sequence_id, sequence_id + 1)
        fut = self._loop.create_future()
        self._queued_messages += 1
        batch = self._batch
        if batch is not None and expected_offset is None:
            batch.add(sequence_id, content, properties=properties, partition_key=partition_key,
                      ordering_key=ordering_key, event_timestamp=event_timestamp, completion=fut)
            if batch.is_full:
                self._flush_batch()
            elif self._batch_timer is None:
                self._batch_timer = self._loop.call_later(self._batch_delay, self._flush_batch)
            return fut
        if batch is not None:
            self._flush_batch()  # keep send order: the open batch goes first
        entry = single_entry(self._name or "", sequence_id, content, properties=properties,
                             partition_key=partition_key, ordering_key=ordering_key,
                             event_timestamp=event_timestamp, compression_type=self._compression,
                             completion=fut)
        self._enqueue(entry, expected_offset)
        return fut

    async def send(self, content: bytes, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None, expected_offset: int | None = None) -> MessageId:
        """Publish one message and wait for the broker's receipt.

        ``expected_offset`` makes the publish conditional: the broker appends
        only if the message would get that topic offset, else the send fails
        with ExpectedOffsetMismatch (``next_offset`` = the actual one).
        """
        await self._wait_for_space()
        fut = self.send_nowait(content, properties, partition_key, ordering_key, event_timestamp,
                               sequence_id, expected_offset)
        return await fut

    def send_async(self, content: bytes, callback: SendCallback | None, **kwargs: Any) -> None:
        """Queue a message; ``callback(result, message_id)`` runs on the event
        loop when it is persisted (Result.Ok) or fails (message_id None)."""
        try:
            fut = self.send_nowait(content, **kwargs)
        except PulsarError as exc:
            if callback is not None:
                callback(exc.result, None)
            return
        if callback is not None:
            fut.add_done_callback(lambda f: _run_callback(callback, f))

    async def _wait_for_space(self) -> None:
        while self._block_if_full and self._queued_messages >= self._max_pending:
            self._check_open()
            self._space.clear()
            await self._space.wait()

    def _flush_batch(self) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._batch is not None and len(self._batch):
            self._enqueue(self._batch.seal(self._name or "", self._compression), None)

    def _enqueue(self, entry: Entry, expected_offset: int | None) -> None:
        cmd = command(Type.SEND, producer_id=self.producer_id, sequence_id=entry.sequence_id,
                      expected_offset=expected_offset)
        if entry.is_batch:
            cmd.send.num_messages = entry.num_messages
            cmd.send.highest_sequence_id = entry.highest_sequence_id
        queued = _Queued(entry, encode_send(cmd, entry.metadata, entry.payload), self._loop.time())
        self._queue.append(queued)
        if self.state is LinkState.READY and self.conn is not None:
            self.conn.send_raw_frame(queued.frame)
        if self._send_timeout is not None and self._timeout_timer is None:
            self._timeout_timer = self._loop.call_later(self._send_timeout, self._check_send_timeout)

    # -- receipts ---------------------------------------------------------------------
    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        if not self._queue:
            return
        head = self._queue[0].entry
        if receipt.sequence_id < head.sequence_id:
            return  # a late receipt for a message already failed by timeout
        if receipt.sequence_id > head.sequence_id:
            # A receipt went missing: reconnecting makes the broker see the
            # pending messages again (deduplication drops the stored ones).
            log.warning("producer %s: receipt for %d while waiting for %d; reconnecting",
                        self._name, receipt.sequence_id, head.sequence_id)
            if self.conn is not None:
                self.conn.close("send receipt out of order")
            return
        self._queue.popleft()
        self._complete(head, receipt.message_id.ledgerId, receipt.message_id.entryId)

    def _complete(self, entry: Entry, ledger: int, entry_id: int) -> None:
        self._queued_messages -= entry.num_messages
        self._last_sequence_id = max(self._last_sequence_id, entry.highest_sequence_id)
        if entry.is_batch:
            n = entry.num_messages
            for i, fut in enumerate(entry.completions):
                if not fut.done():
                    fut.set_result(MessageId(ledger, entry_id, i, self._partition, n))
        else:
            fut = entry.completions[0]
            if not fut.done():
                fut.set_result(MessageId(ledger, entry_id, -1, self._partition))
        self._space.set()

    def on_send_error(self, error: pb.CommandSendError) -> None:
        index = next((i for i, q in enumerate(self._queue) if q.entry.sequence_id == error.sequence_id), None)
        if error.error == ServerError.ExpectedOffsetMismatch or error.error == ServerError.ChecksumError:
            if index is None:
                return
            queued = self._queue[index]
            del self._queue[index]
            if error.error == ServerError.ExpectedOffsetMismatch:
                exc: PulsarError = ExpectedOffsetMismatch(
                    error.message, error.error, error.next_offset if error.HasField("next_offset") else None)
            else:
                exc = from_server_error(error.error, error.message)
            self._fail_entry(queued.entry, exc)
            return
        exc = from_server_error(error.error, error.message)
        if error.error in _FATAL_SEND_ERRORS:
            self._fail(exc)
            return
        log.warning("producer %s: send error %s; reconnecting to resend", self._name, exc)
        if self.conn is not None:
            self.conn.close(f"send error: {exc}")

    def _fail_entry(self, entry: Entry, exc: PulsarError) -> None:
        self._queued_messages -= entry.num_messages
        for fut in entry.completions:
            if not fut.done():
                fut.set_exception(exc)
        self._space.set()

    def _fail_all(self, exc: PulsarError) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._batch is not None and len(self._batch):
            self._fail_entry(self._batch.seal(self._name or ""), exc)
        queue, self._queue = self._queue, deque()
        for queued in queue:
            self._fail_entry(queued.entry, exc)

    def _check_send_timeout(self) -> None:
        self._timeout_timer = None
        if not self._queue or self._send_timeout is None:
            return
        age = self._loop.time() - self._queue[0].queued_at
        if age >= self._send_timeout:
            self._fail_all(Timeout(f"no receipt within {self._send_timeout}s on {self._topic}"))
            return
        self._timeout_timer = self._loop.call_later(self._send_timeout - age, self._check_send_timeout)

    # -- flush and close ------------------------------------------------------------
    async def flush(self) -> None:
        """Send the open batch and wait until every queued message is settled
        (persisted or failed). Does not raise for individual failures."""
        self._flush_batch()
        waiting = [q.entry.completions[-1] for q in self._queue]
        if waiting:
            await asyncio.wait(waiting)

    async def close(self) -> None:
        """Flush, then unregister. Idempotent."""
        if self.state in (LinkState.CLOSED, LinkState.CLOSING):
            return
        if self.state is not LinkState.FAILED:
            await self.flush()
        self.state = LinkState.CLOSING
        self._stop_reconnecting()
        for timer in (self._batch_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        conn, self.conn = self.conn, None
        if conn is not None and conn.is_open:
            self._detach(conn)
            try:
                await conn.request(command(Type.CLOSE_PRODUCER, producer_id=self.producer_id,
                                           request_id=self._client.new_request_id()),
                                   self._client.operation_timeout)
            except PulsarError as exc:
                log.debug("producer %s: close not confirmed: %s", self._name, exc)
        self._fail_all(AlreadyClosed(f"producer on {self._topic} closed"))
        self.state = LinkState.CLOSED
        self._space.set()
        self._client._forget(self)


def _run_callback(callback: SendCallback, fut: asyncio.Future) -> None:
    try:
        exc = fut.exception()
        if exc is None:
            callback(Result.Ok, fut.result())
        else:
            callback(getattr(exc, "result", Result.UnknownError), None)
    except Exception:
        log.exception("send callback raised")
