"""AsyncProducer: publishes to one topic (or one partition of it).

Messages are queued in send order as *entries* (single messages, or batches
when batching is on) and written to the broker at once when connected.
Receipts come back in the same order and complete each message's future with
its MessageId (which carries the message's topic offset, ``.offset``). After
a reconnect the producer registers again under the same id and name (echoing
the topic epoch it was given) and rewrites every entry still waiting for a
receipt, in order.

Failure modes of a send: Timeout when no receipt arrived within
``send_timeout_millis`` (as in Pulsar, all queued messages fail together);
ProducerQueueIsFull when ``max_pending_messages`` are queued and
``block_if_queue_full`` is off; ProducerFenced / TopicTerminated end the
producer; ExpectedOffsetMismatch fails a conditional send.

Conditional publish (``expected_offset``): the broker appends the entry only
if its first message gets exactly that topic offset, and only if the send was
planned in the producer's current *offset epoch*. A refusal starts a new
epoch, so every conditional send pipelined behind a refused one is refused
too; the producer fails them at once with the refused one and plans later
sends in the new epoch. The epoch lives in the broker's producer object, so
it starts again at 0 after every reconnect, and so does the client's. With
batching on, conditional messages whose expected offsets follow each other
share one batch entry, which the broker appends or refuses as a whole.

Idempotent producers (``idempotent=True``, see :mod:`.idempotence`): entries
carry a leased pid, its generation and contiguous sequence numbers; resends
after reconnects reuse them, so the broker stores each entry once. A send
timeout then fails the futures but keeps the entries queued and numbered
(their outcome is unknown; they are still retried and land at most once),
so the sequence never gets a gap. ProducerFenced (another holder took the
pid over), NotAllowedError (the pid expired) and OutOfOrderSequence (the
broker lost entries it had acknowledged) end the producer.

Extension point, not implemented yet: chunking.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from magnetar.protocol import ServerError, Type, command, pb
from magnetar.protocol.commands import signed64
from magnetar.protocol.frames import encode_send

from .batch_builder import BatchBuilder, SealedEntry, single_entry
from .connection import BrokerConnection
from .enums import CompressionType, ProducerAccessMode
from .errors import (AlreadyClosed, ExpectedOffsetMismatch, InvalidConfiguration, MessageTooBig,
                     ProducerQueueIsFull, PulsarError, Result, Timeout, from_server_error)
from .idempotence import IDEMPOTENT_METADATA, Identity, LeaseRenewer, PidLease, lease_pid, restamp
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

#: Refusals of one entry that store nothing and leave the producer usable.
_REFUSALS = frozenset({ServerError.ExpectedOffsetMismatch, ServerError.ChecksumError})


@dataclass(slots=True)
class _Queued:
    """An entry waiting for its receipt, with the frame that carries it."""

    entry: SealedEntry
    frame: bytes
    queued_at: float
    #: Conditional publish: the offset the entry's first message must get.
    expected_offset: int | None = None
    #: The offset epoch the conditional send was planned in.
    offset_epoch: int = 0
    #: Idempotence: the entry's first sequence number (-1: not idempotent).
    pid_sequence: int = -1
    #: A copy of the frame was written to the current connection.
    written: bool = False
    #: Copies on the current connection the broker will refuse as sequence
    #: gaps (written before an earlier entry's refusal renumbered this one).
    doomed: int = 0
    #: Futures already failed by a send timeout; the entry is still retried.
    settled: bool = False


class AsyncProducer(BrokerLink):
    kind = "producer"

    def __init__(
        self, client, topic: str, producer_id: int, *, producer_name: str | None = None,
        initial_sequence_id: int | None = None, send_timeout_millis: int = 30000,
        compression_type: CompressionType = CompressionType.NONE, max_pending_messages: int = 1000,
        block_if_queue_full: bool = False, batching_enabled: bool = False,
        batching_max_messages: int = 1000, batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10, access_mode: ProducerAccessMode = ProducerAccessMode.Shared,
        properties: Mapping[str, str] | None = None, idempotent: bool = False, pid: int | None = None,
        pid_lease_ms: int = 60_000, schema: pb.Schema | None = None,
    ) -> None:
        super().__init__(client, topic)
        if max_pending_messages < 1:
            raise InvalidConfiguration("max_pending_messages must be >= 1")
        if pid is not None and not idempotent:
            raise InvalidConfiguration("pid is only meaningful with idempotent=True")
        if pid is not None and pid < 1:
            raise InvalidConfiguration(f"pid must be a leased producer id (>= 1), not {pid}")
        if pid_lease_ms < 100:
            raise InvalidConfiguration("pid_lease_ms must be >= 100")
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
        #: The expected offset of the open batch's first message (a
        #: conditional batch), or None (an unconditional one).
        self._batch_expected: int | None = None
        self._access_mode = ProducerAccessMode(access_mode)
        self._metadata = dict(properties or {})
        #: The schema announced when registering (the broker checks it and answers its version).
        self._schema = schema
        self._schema_version: bytes | None = None
        self._partition = partition_index(topic)
        self._topic_epoch: int | None = None
        self._epoch = 0
        self._offset_epoch = 0
        self._idempotent = idempotent
        self._resume_pid = pid
        self._lease_ms = pid_lease_ms
        self._identity: Identity | None = None
        self._renewer: LeaseRenewer | None = None
        if idempotent:
            self._metadata[IDEMPOTENT_METADATA[0]] = IDEMPOTENT_METADATA[1]
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

    @property
    def pid(self) -> int | None:
        """The leased producer id of an idempotent producer (None otherwise).
        Keep it to resume this identity later: ``create_producer(..., pid=...)``."""
        return self._identity.pid if self._identity is not None else None

    @property
    def generation(self) -> int | None:
        """The generation of the pid this producer holds (None if not idempotent)."""
        return self._identity.generation if self._identity is not None else None

    @property
    def schema_version(self) -> bytes | None:
        """The broker's version of the schema this producer announced (None
        without one); an entry's MessageMetadata carries it as ``schema_version``."""
        return self._schema_version

    @property
    def next_sequence(self) -> int | None:
        """The sequence number the next entry will get (None if not idempotent).

        Right after creation it is the number of messages the broker holds
        under this pid: 0 for a new pid, where the previous holder stopped
        after a takeover (``pid=...``)."""
        return self._identity.next_sequence if self._identity is not None else None

    @property
    def offset_epoch(self) -> int:
        """The epoch conditional sends are planned in now (see the module doc)."""
        return self._offset_epoch

    # -- registration -----------------------------------------------------------------
    async def _register(self, conn: BrokerConnection, timeout: float) -> None:
        conn.attach_producer(self.producer_id, self)
        if self._idempotent:
            await self._lease(conn, timeout)
        cmd = command(
            Type.PRODUCER, topic=self._topic, producer_id=self.producer_id,
            request_id=self._client.new_request_id(), producer_name=self._name,
            user_provided_producer_name=self._user_named, epoch=self._epoch,
            producer_access_mode=int(self._access_mode), topic_epoch=self._topic_epoch,
            metadata=[pb.KeyValue(key=k, value=v) for k, v in self._metadata.items()],
        )
        if self._schema is not None:
            cmd.producer.schema.CopyFrom(self._schema)
        self._epoch += 1
        reply = (await conn.request(cmd, timeout)).producer_success
        if reply.HasField("schema_version"):
            self._schema_version = reply.schema_version
        if self._name is None:
            self._name = reply.producer_name
        if reply.HasField("topic_epoch"):
            self._topic_epoch = reply.topic_epoch
        if self.registrations == 0 and self._initial_sequence_id is None and reply.last_sequence_id >= 0:
            # The broker knows this producer name's history (deduplication):
            # continue after it.
            self._last_sequence_id = reply.last_sequence_id
            self._next_sequence_id = reply.last_sequence_id + 1

    async def _lease(self, conn: BrokerConnection, timeout: float) -> PidLease:
        """Lease (first time) or renew (every reconnect: it also finds out
        early whether another holder took the pid over) the producer id."""
        request_id = self._client.new_request_id()
        if self._identity is None:
            lease = await lease_pid(conn, request_id, self._topic, pid=self._resume_pid or -1,
                                    lease_ms=self._lease_ms, timeout=timeout)
            self._identity = Identity(lease)
            log.info("producer on %s: pid %d generation %d, next sequence %d", self._topic, lease.pid,
                     lease.generation, lease.next_sequence)
            return lease
        return await lease_pid(conn, request_id, self._topic, pid=self._identity.pid,
                               generation=self._identity.generation, lease_ms=self._lease_ms, timeout=timeout)

    async def _renew_lease(self) -> PidLease:
        conn = await self.wait_ready()
        return await self._lease(conn, self._client.operation_timeout)

    def _detach(self, conn: BrokerConnection) -> None:
        conn.detach_producer(self.producer_id, self)

    def _unregister_command(self) -> pb.BaseCommand:
        return command(Type.CLOSE_PRODUCER, producer_id=self.producer_id, request_id=self._client.new_request_id())

    def _on_link_up(self) -> None:
        conn = self.conn
        # A new broker-side producer: its offset epoch starts at 0. Every
        # pending conditional send is still a valid plan (those planned before
        # a refusal were failed with it), so it is re-planned in epoch 0.
        self._offset_epoch = 0
        for queued in self._queue:
            if queued.expected_offset is not None and queued.offset_epoch != 0:
                queued.offset_epoch = 0
                queued.frame = self._encode(queued)
            queued.doomed = 0
            queued.written = True
            conn.send_raw_frame(queued.frame)
        if self._identity is not None and self._renewer is None:
            self._renewer = LeaseRenewer(self._renew_lease, self._lease_ms, self._lease_lost)
            self._renewer.start()

    def _on_link_down(self) -> None:
        for queued in self._queue:
            queued.written = False
            queued.doomed = 0

    def _lease_lost(self, exc: PulsarError) -> None:
        if self.state not in (LinkState.CLOSING, LinkState.CLOSED, LinkState.FAILED):
            self._fail(exc)

    def _on_fatal(self, exc: PulsarError) -> None:
        self._stop_renewing()
        self._fail_all(exc)

    def _stop_renewing(self) -> None:
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.stop()

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
        if expected_offset is not None and expected_offset < 0:
            raise InvalidConfiguration(f"expected_offset must be >= 0, not {expected_offset}")
        if self.conn is not None and len(content) > self.conn.max_message_size:
            raise MessageTooBig(f"{len(content)} bytes > max message size {self.conn.max_message_size}")
        if sequence_id is None:
            sequence_id = self._next_sequence_id
        self._next_sequence_id = max(self._next_sequence_id, sequence_id + 1)
        fut = self._loop.create_future()
        self._queued_messages += 1
        batch = self._batch
        if batch is not None:
            if len(batch) and not self._joins_batch(expected_offset):
                self._flush_batch()  # keep send order: the open batch goes first
            if not len(batch):
                self._batch_expected = expected_offset
            batch.add(sequence_id, content, properties=properties, partition_key=partition_key,
                      ordering_key=ordering_key, event_timestamp=event_timestamp, completion=fut)
            if batch.is_full:
                self._flush_batch()
            elif self._batch_timer is None:
                self._batch_timer = self._loop.call_later(self._batch_delay, self._flush_batch)
            return fut
        pid_fields = self._take_sequences(1)
        entry = single_entry(self._name or "", sequence_id, content, properties=properties,
                             partition_key=partition_key, ordering_key=ordering_key,
                             event_timestamp=event_timestamp, compression_type=self._compression,
                             completion=fut, pid_fields=pid_fields)
        self._enqueue(entry, expected_offset, pid_fields)
        return fut

    def send_entry_nowait(self, metadata: bytes, payload: bytes | memoryview, num_messages: int,
                          sequence_id: int, highest_sequence_id: int | None = None) -> asyncio.Future:
        """Queue an already-built entry (a MessageMetadata and its payload,
        possibly a compressed batch) as one SEND; return a future of the
        MessageId of its first message.

        For forwarding stored entries untouched (geo-replication) and for
        callers that build batches themselves (the Spark sink): the metadata
        is sent as given, nothing is batched or renumbered, and the
        pending-message limit is not applied (the caller paces itself).
        ``highest_sequence_id`` (a batch's last member; default
        ``sequence_id``) is what the broker's deduplication records.
        Raises AlreadyClosed / the producer's fatal error at once.
        """
        self._check_open()
        fut = self._loop.create_future()
        is_batch = pb.MessageMetadata.FromString(metadata).HasField("num_messages_in_batch")
        highest = sequence_id if highest_sequence_id is None else highest_sequence_id
        entry = SealedEntry(bytes(metadata), bytes(payload), sequence_id, highest, max(1, num_messages), is_batch,
                            [fut])
        self._next_sequence_id = max(self._next_sequence_id, highest + 1)
        self._queued_messages += entry.num_messages
        self._enqueue(entry, None, None)
        return fut

    def _joins_batch(self, expected_offset: int | None) -> bool:
        """Whether a message may join the open (non-empty) batch: unconditional
        ones join an unconditional batch; a conditional one joins a
        conditional batch whose offsets it continues, so the batch's
        condition (on its first message) is exactly the conjunction of its
        members' conditions."""
        if self._batch_expected is None:
            return expected_offset is None
        return expected_offset == self._batch_expected + len(self._batch)

    def _take_sequences(self, n: int) -> tuple[int, int, int] | None:
        return self._identity.take(n) if self._identity is not None else None

    async def send(self, content: bytes, properties: Mapping[str, str] | None = None, partition_key: str | None = None,
                   ordering_key: bytes | str | None = None, event_timestamp: int | None = None,
                   sequence_id: int | None = None, expected_offset: int | None = None) -> MessageId:
        """Publish one message and wait for the broker's receipt; return its
        MessageId (``.offset``: the message's topic offset).

        ``expected_offset`` makes the publish conditional: the broker appends
        only if the message gets that topic offset, else the send fails with
        ExpectedOffsetMismatch (``next_offset`` = the actual upcoming offset).
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
        batch = self._batch
        if batch is not None and len(batch):
            pid_fields = self._take_sequences(len(batch))
            entry = batch.seal(self._name or "", self._compression, pid_fields=pid_fields)
            self._enqueue(entry, self._batch_expected, pid_fields)
            self._batch_expected = None

    def _encode(self, queued: _Queued) -> bytes:
        entry = queued.entry
        cmd = command(Type.SEND, producer_id=self.producer_id, sequence_id=entry.sequence_id)
        if queued.expected_offset is not None:
            cmd.send.expected_offset = queued.expected_offset
            cmd.send.offset_epoch = queued.offset_epoch
        if entry.is_batch:
            cmd.send.num_messages = entry.num_messages
            cmd.send.highest_sequence_id = entry.highest_sequence_id
        return encode_send(cmd, entry.metadata, entry.payload)

    def _enqueue(self, entry: SealedEntry, expected_offset: int | None,
                 pid_fields: tuple[int, int, int] | None) -> None:
        pid_sequence = -1 if pid_fields is None else pid_fields[2]
        queued = _Queued(entry, b"", self._loop.time(), expected_offset, self._offset_epoch, pid_sequence)
        queued.frame = self._encode(queued)
        self._queue.append(queued)
        self._write(queued)
        if self._send_timeout is not None and self._timeout_timer is None:
            self._timeout_timer = self._loop.call_later(self._send_timeout, self._check_send_timeout)

    def _write(self, queued: _Queued) -> None:
        if self.state is LinkState.READY and self.conn is not None:
            self.conn.send_raw_frame(queued.frame)
            queued.written = True

    # -- receipts ---------------------------------------------------------------------
    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None:
        if not self._queue:
            return
        head = self._queue[0]
        if receipt.sequence_id < head.entry.sequence_id:
            return  # a late receipt for a message already failed by timeout
        if receipt.sequence_id > head.entry.sequence_id:
            # A receipt went missing: reconnecting makes the broker see the
            # pending messages again (deduplication drops the stored ones).
            log.warning("producer %s: receipt for %d while waiting for %d; reconnecting",
                        self._name, receipt.sequence_id, head.entry.sequence_id)
            if self.conn is not None:
                self.conn.close("send receipt out of order")
            return
        self._queue.popleft()
        offset = receipt.offset if receipt.HasField("offset") else None
        self._complete(head.entry, signed64(receipt.message_id.ledgerId), signed64(receipt.message_id.entryId),
                       offset)

    def _complete(self, entry: SealedEntry, ledger: int, entry_id: int, first_offset: int | None) -> None:
        self._queued_messages -= entry.num_messages
        self._last_sequence_id = max(self._last_sequence_id, entry.highest_sequence_id)
        if entry.is_batch:
            n = entry.num_messages
            for i, fut in enumerate(entry.completions):
                if not fut.done():
                    offset = None if first_offset is None else first_offset + i
                    fut.set_result(MessageId(ledger, entry_id, i, self._partition, n, offset))
        else:
            fut = entry.completions[0]
            if not fut.done():
                fut.set_result(MessageId(ledger, entry_id, -1, self._partition, offset=first_offset))
        self._space.set()

    def on_send_error(self, error: pb.CommandSendError) -> None:
        code = error.error
        index = next((i for i, q in enumerate(self._queue) if q.entry.sequence_id == error.sequence_id), None)
        if index is None:
            if code in _REFUSALS or code == ServerError.OutOfOrderSequence:
                return  # about an entry already failed (refused with an earlier one, or timed out)
        else:
            queued = self._queue[index]
            if queued.doomed and code == ServerError.OutOfOrderSequence:
                queued.doomed -= 1  # the copy written before this entry was renumbered
                return
            if code == ServerError.ExpectedOffsetMismatch:
                if error.HasField("offset_epoch"):
                    self._offset_epoch = max(self._offset_epoch, error.offset_epoch)
                next_offset = error.next_offset if error.HasField("next_offset") else None
                self._refuse(index, ExpectedOffsetMismatch(error.message, code, next_offset))
                return
            if code == ServerError.ChecksumError:
                self._refuse(index, from_server_error(code, error.message))
                return
        exc = from_server_error(code, error.message)
        if code in _FATAL_SEND_ERRORS or (self._identity is not None and code == ServerError.OutOfOrderSequence):
            # An idempotent producer's gap that is not one it caused itself:
            # the broker lost acknowledged entries; resending cannot fix it.
            self._fail(exc)
            return
        log.warning("producer %s: send error %s; reconnecting to resend", self._name, exc)
        if self.conn is not None:
            self.conn.close(f"send error: {exc}")

    def _refuse(self, index: int, exc: PulsarError) -> None:
        """The broker refused the entry at ``index`` and stored nothing.

        Fail it. After an expected offset mismatch, also fail every
        conditional entry behind it: the refusal started a new offset epoch,
        so the broker refuses them all (they were planned assuming the
        refused one would land). An idempotent producer then hands the
        refused numbers back: the entries left behind are renumbered down
        (and rewritten), since the broker refuses their old copies as gaps.
        """
        queue = list(self._queue)
        refused = queue[index]
        kept: list[_Queued] = []
        dropped: list[tuple[_Queued, PulsarError]] = [(refused, exc)]
        mismatch = isinstance(exc, ExpectedOffsetMismatch)
        next_offset = getattr(exc, "next_offset", None)
        for queued in queue[index + 1:]:
            if mismatch and queued.expected_offset is not None:
                dropped.append((queued, ExpectedOffsetMismatch(
                    f"refused with an earlier conditional send (expected offset {queued.expected_offset}"
                    f" planned in offset epoch {queued.offset_epoch}): {exc}",
                    ServerError.ExpectedOffsetMismatch, next_offset)))
            else:
                kept.append(queued)
                next_offset = None  # this one may land first: the upcoming offset is unknown
        self._queue = deque(queue[:index] + kept)
        for queued, failure in dropped:
            self._fail_entry(queued.entry, failure)
        if self._identity is not None and refused.pid_sequence >= 0:
            self._renumber(kept, refused.pid_sequence)

    def _renumber(self, entries: list[_Queued], first_sequence: int) -> None:
        sequence = first_sequence
        for queued in entries:
            if queued.written:
                queued.doomed += 1
            queued.pid_sequence = sequence
            queued.entry.metadata = restamp(queued.entry.metadata, sequence)
            queued.frame = self._encode(queued)
            sequence += queued.entry.num_messages
            self._write(queued)
        self._identity.next_sequence = sequence

    def _fail_entry(self, entry: SealedEntry, exc: PulsarError) -> None:
        self._queued_messages -= entry.num_messages
        _settle(entry, exc)
        self._space.set()

    def _fail_open_batch(self, exc: PulsarError) -> None:
        if self._batch_timer is not None:
            self._batch_timer.cancel()
            self._batch_timer = None
        if self._batch is not None and len(self._batch):
            self._fail_entry(self._batch.seal(self._name or ""), exc)  # never numbered nor sent
            self._batch_expected = None

    def _fail_all(self, exc: PulsarError) -> None:
        self._fail_open_batch(exc)
        queue, self._queue = self._queue, deque()
        for queued in queue:
            self._fail_entry(queued.entry, exc)

    def _check_send_timeout(self) -> None:
        self._timeout_timer = None
        oldest = next((q for q in self._queue if not q.settled), None)
        if oldest is None or self._send_timeout is None:
            return
        age = self._loop.time() - oldest.queued_at
        if age < self._send_timeout:
            self._timeout_timer = self._loop.call_later(self._send_timeout - age, self._check_send_timeout)
            return
        exc = Timeout(f"no receipt within {self._send_timeout}s on {self._topic}")
        if self._identity is None:
            self._fail_all(exc)
            return
        # Idempotent: the outcome is unknown but the entries keep their
        # numbers and stay queued, so later entries have no gap and each of
        # these still lands at most once.
        self._fail_open_batch(exc)
        for queued in self._queue:
            if not queued.settled:
                queued.settled = True
                _settle(queued.entry, exc)

    # -- flush and close ------------------------------------------------------------
    async def flush(self) -> None:
        """Send the open batch and wait until every queued message is settled
        (persisted or failed). Does not raise for individual failures."""
        self._flush_batch()
        waiting = [q.entry.completions[-1] for q in self._queue]
        if waiting:
            await asyncio.wait(waiting)

    async def close(self, *, flush: bool = True) -> None:
        """Flush (unless ``flush`` is false: what is pending fails with
        AlreadyClosed), then unregister. Idempotent."""
        if self.state in (LinkState.CLOSED, LinkState.CLOSING):
            return
        if flush and self.state is not LinkState.FAILED:
            await self.flush()
        self.state = LinkState.CLOSING
        self._stop_renewing()
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


def _settle(entry: SealedEntry, exc: PulsarError) -> None:
    for fut in entry.completions:
        if not fut.done():
            fut.set_exception(exc)


def _run_callback(callback: SendCallback, fut: asyncio.Future) -> None:
    try:
        exc = fut.exception()
        if exc is None:
            callback(Result.Ok, fut.result())
        else:
            callback(getattr(exc, "result", Result.UnknownError), None)
    except Exception:
        log.exception("send callback raised")
