"""Producers: PRODUCER, SEND and its receipts, CLOSE_PRODUCER, GET_NEXT_OFFSET,
LEASE_PID(_BATCH).

The SEND path runs once per entry: it stays synchronous up to
``Topic.publish`` and builds receipts directly. Flow control: while more than
``MAX_PENDING_SENDS`` sends of one connection wait for storage, its socket is
not read (the client's pending queue fills and it blocks, as with Pulsar).
Failure modes: refusals answer with the error's Pulsar code; an unexpected
failure while creating a producer answers ServiceNotReady (retryable).
"""
from __future__ import annotations

import asyncio
import itertools
import logging

from magnetar.broker.errors import BrokerError, ExpectedOffsetMismatch
from magnetar.broker.topics.producer import PendingSend, Producer
from magnetar.metadata import MetadataError
from magnetar.protocol import ProtocolError, ServerError, pb
from magnetar.storage import StorageError
from magnetar.protocol.commands import Type, command, error, message_id, success
from magnetar.protocol.frames import Frame, PayloadBlock
from magnetar.protocol.connection import State

from .. import permissions
from .session import UINT64_MAX, ClientSession, topic_name

log = logging.getLogger(__name__)

MAX_PENDING_SENDS = 10_000
DEFAULT_LEASE_MS = 60_000
_SEND_RECEIPT = Type.SEND_RECEIPT
_CLOSED = State.CLOSED
_names = itertools.count()


def assigned_name(session: ClientSession) -> str:
    """A name for a producer that gave none, unique across this broker's
    restarts (Pulsar's form, ``<cluster>-<broker>-<n>``, with the broker's
    start id in the middle): deduplication remembers producers by name."""
    service = session.service
    return f"{session.config.cluster_name}-{service.broker_id}-{service.instance_id}-{next(_names)}"


def _metadata_flag(req: pb.CommandProducer, key: str) -> bool:
    """Whether the producer's metadata (its ``properties``) sets ``key`` to "true"."""
    return any(kv.key == key and kv.value == "true" for kv in req.metadata)


def on_producer_frame(session: ClientSession, frame: Frame) -> None:
    """PRODUCER: the id is marked as being created now, in frame order, so
    that a CLOSE_PRODUCER right behind it (a client that gave up waiting)
    undoes the creation instead of finding nothing and leaving a producer
    nobody owns holding its name; the creating runs as a task."""
    req = frame.command.producer
    if req.producer_id not in session.producers:
        session.producers_creating[req.producer_id] = req.request_id
    session.spawn(on_producer(session, req))


def _still_wanted(session: ClientSession, req: pb.CommandProducer) -> bool:
    return session.producers_creating.get(req.producer_id) == req.request_id


def _check_still_wanted(session: ClientSession, req: pb.CommandProducer) -> None:
    if not _still_wanted(session, req):
        raise BrokerError("the producer was closed while it was being created", ServerError.ServiceNotReady)


async def on_producer(session: ClientSession, req: pb.CommandProducer) -> None:
    existing = session.producers.get(req.producer_id)
    if existing is not None:
        # A retried create for a producer that is already there: same answer.
        session.write(command(Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=existing.name,
                              last_sequence_id=-1, topic_epoch=existing.epoch or None))
        return
    try:
        await _create_producer(session, req)
    finally:
        if _still_wanted(session, req):
            del session.producers_creating[req.producer_id]


async def _create_producer(session: ClientSession, req: pb.CommandProducer) -> None:
    try:
        name = topic_name(req.topic)
        await permissions.check(session.service.authorizer, session.service.store, session.role, "produce", name)
        # Encrypted producers (end-to-end encryption) need nothing of the
        # broker: keys and parameters travel in the message metadata, which is
        # stored and delivered untouched; only consumers decrypt.
        await session.service.check_served_here(name)
        topic = await session.service.get_topic(name)
        schema_version = await session.service.schemas.for_producer(
               topic, req.schema if req.HasField("schema") else None)
        producer = Producer(
            producer_id=req.producer_id,
            name=req.producer_name or assigned_name(session),
            topic=topic,
            access_mode=req.producer_access_mode,
            user_provided_name=req.user_provided_producer_name and bool(req.producer_name),
            idempotent=_metadata_flag(req, "magnetar.idempotent"),
            deduplicate=_metadata_flag(req, "magnetar.deduplicate"),
            address=session.peer,
            sink=ProducerReports(session),
            client_version=session.client_version,
            metadata={kv.key: kv.value for kv in req.metadata},
        )
        # Checked before joining the topic: an exclusive producer closed
        # while it waited must not fence the topic's current one.
        _check_still_wanted(session, req)
        session.producers[req.producer_id] = producer
        requested_epoch = req.topic_epoch if req.HasField("topic_epoch") else None
        try:
            waiter = await topic.add_producer(producer, requested_epoch)
        except BaseException:
            session.producers.pop(req.producer_id, None)
            raise
        if waiter is not None:
            session.write(command(Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=producer.name,
                                  producer_ready=False))
            try:
                await waiter
            except BaseException:
                session.producers.pop(req.producer_id, None)
                raise
        if not _still_wanted(session, req):
            # Closed while joining: leave again (on_close_producer may have
            # run before the producer had joined the topic).
            session.producers.pop(req.producer_id, None)
            topic.remove_producer(producer)
            _check_still_wanted(session, req)
        session.write(command(
               Type.PRODUCER_SUCCESS, request_id=req.request_id, producer_name=producer.name,
               last_sequence_id=topic.last_sequence_id(producer.name, producer.deduplicate),
               topic_epoch=producer.epoch if producer.access_mode != pb.Shared else None,
               producer_ready=True, schema_version=schema_version,
           ))
    except BrokerError as exc:
        session.write(error(req.request_id, exc.code, str(exc)))
    except asyncio.CancelledError:
        raise
    except (StorageError, MetadataError, OSError) as exc:  # the disk is full or failing: a retry may find room
        log.warning("cannot create producer on %s: storage: %s", req.topic, exc)
        session.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot create producer: {exc}"))
    except Exception as exc:
        log.exception("cannot create producer on %s", req.topic)
        session.write(error(req.request_id, ServerError.ServiceNotReady, f"cannot create producer: {exc}"))


class ProducerReports:
    """A producer's sink (``topics.producer.ProducerSink``) on its client's connection."""

    __slots__ = ("session",)

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    def send_result(self, producer: Producer, pending: PendingSend) -> None:
        """SEND_RECEIPT or SEND_ERROR for ``pending``; resumes reading the
        socket once few enough sends wait."""
        session = self.session
        session.pending_sends -= 1
        if session.reading_paused and session.pending_sends < MAX_PENDING_SENDS // 2 \
                and session.transport is not None:
            session.reading_paused = False
            if not session.rate_paused:
                session.transport.resume_reading()
        # A broker whose metadata session lapsed still reports what storage
        # settled: a stored entry passed the ledger's fence check after its fsync
        # (``storage/file/ledger.py: write_fence``), so a new owner's recovery has it.
        # Withholding that receipt would leave the client guessing; an official
        # client even reports such a send as failed (ProducerFenced) when its
        # retry meets a rival exclusive producer on the new owner.
        if session.proto.state is _CLOSED:  # proto.closed without the property's call
            # The client left: nobody to tell, and this must not raise (storage
            # is failing a run of entries, other producers' among them).
            return
        exc = pending.error
        seq = pending.sequence_id
        if exc is None:
            if pending.ledger_id < 0:
                # A duplicate whose original is no longer remembered: Pulsar's -1:-1.
                session.write(command(Type.SEND_RECEIPT, producer_id=producer.producer_id, sequence_id=seq,
                                      highest_sequence_id=pending.highest_sequence_id,
                                      message_id=message_id(UINT64_MAX, UINT64_MAX)))
                return
            # The producer's receipt encoder (compiled when built): once per stored entry.
            session.queue_one(producer.receipt(seq, pending.highest_sequence_id, pending.ledger_id,
                                               pending.entry_id, pending.first_offset))
            return
        code = exc.code if isinstance(exc, BrokerError) else ServerError.PersistenceError
        cmd = command(Type.SEND_ERROR, producer_id=producer.producer_id, sequence_id=seq, error=code,
                      message=str(exc))
        if isinstance(exc, ExpectedOffsetMismatch):
            cmd.send_error.next_offset = exc.next_offset
            cmd.send_error.offset_epoch = exc.offset_epoch
        session.write(cmd)

    def closed(self, producer: Producer, assigned: tuple[str, str] | None = None) -> None:
        """CLOSE_PRODUCER: the client reconnects, to ``assigned`` (plain and TLS URLs) at once when
        given (PIP-307: the topic moved there), else after a lookup."""
        session = self.session
        if session.producers.get(producer.producer_id) is producer:
            del session.producers[producer.producer_id]
            if session.proto.closed:
                return
            session.write(command(Type.CLOSE_PRODUCER, producer_id=producer.producer_id, request_id=UINT64_MAX,
                                  assignedBrokerServiceUrl=assigned[0] if assigned else None,
                                  assignedBrokerServiceUrlTls=assigned[1] if assigned and assigned[1] else None))


def on_send(session: ClientSession, frame: Frame) -> None:
    """A SEND frame (protobuf's or the fast decoder's): see :func:`on_plain_send`."""
    on_plain_send(session, frame.command.send, frame.block)


def on_plain_send(session: ClientSession, send, block: PayloadBlock | None) -> None:
    """One entry's SEND (``send``: a ``CommandSend`` or the fast decoder's
    ``SendCommandView``): queued behind its producer's earlier sends and
    published, or answered at once (unknown producer, bad checksum). Raises
    ProtocolError (the connection closes) for a SEND without a payload."""
    producer = session.producers.get(send.producer_id)
    if block is None:
        raise ProtocolError("SEND without a payload")
    if producer is None:
        session.write(command(Type.SEND_ERROR, producer_id=send.producer_id, sequence_id=send.sequence_id,
                              error=ServerError.NotAllowedError, message="unknown producer id"))
        return
    # Producer.expect inlined: this runs once per entry.
    pending = PendingSend(send.sequence_id, send.highest_sequence_id, producer)
    producer._pending.append(pending)
    # Counted before publishing: the outcome may be reported before publish_into returns.
    session.pending_sends += 1
    if session.pending_sends > MAX_PENDING_SENDS and not session.reading_paused and session.transport is not None:
        session.reading_paused = True
        session.transport.pause_reading()
    if block.checked == 1 or block.verify_checksum():  # checked: the compiled decoder's verdict
        topic = producer.topic
        topic.publish_into(producer, send, block, pending, session.received_ms)
        limiter = topic.publish_limiter
        if limiter is not None:
            wait = limiter.charge(send.num_messages or 1, len(block.payload))
            if wait > 0:
                throttle(session, wait)
    else:
        pending.failed(BrokerError("checksum mismatch", ServerError.ChecksumError))


def throttle(session: ClientSession, seconds: float) -> None:
    """Stop reading the connection for ``seconds``: its producers went over a
    topic's publish rate (Pulsar's throttling; nothing is refused)."""
    if session.rate_paused or session.transport is None:
        return
    session.rate_paused = True
    session.transport.pause_reading()
    session.throttled += 1

    def resume() -> None:
        session.rate_paused = False
        if not session.reading_paused and session.transport is not None and not session.transport.is_closing():
            session.transport.resume_reading()

    asyncio.get_running_loop().call_later(seconds, resume)


def on_close_producer(session: ClientSession, frame: Frame) -> None:
    req = frame.command.close_producer
    session.producers_creating.pop(req.producer_id, None)  # a creation under way is undone when it ends
    producer = session.producers.pop(req.producer_id, None)
    if producer is not None:
        producer.topic.remove_producer(producer)
    session.write(success(req.request_id))


async def on_get_next_offset(session: ClientSession, req: pb.CommandGetNextOffset) -> None:
    """GET_NEXT_OFFSET: the topic's next offset, loading it if need be.
    Always answers: a storage or metadata failure while loading (the object
    store or etcd out of reach, the ledger fenced by another owner) is
    ServiceNotReady, which the client retries."""
    try:
        topic = await session.service.get_topic(topic_name(req.topic))
        session.write(command(Type.GET_NEXT_OFFSET_RESPONSE, request_id=req.request_id,
                              next_offset=topic.next_offset))
    except BrokerError as exc:
        session.write(command(Type.GET_NEXT_OFFSET_RESPONSE, request_id=req.request_id, error=exc.code,
                              message=str(exc)))
    except (StorageError, MetadataError, OSError) as exc:
        log.warning("next offset of %s: storage: %s", req.topic, exc)
        session.write(command(Type.GET_NEXT_OFFSET_RESPONSE, request_id=req.request_id,
                              error=ServerError.ServiceNotReady, message=f"cannot load the topic: {exc}"))


async def on_lease_pid(session: ClientSession, request_id: int, requests: list[pb.CommandLeasePid]) -> None:
    leases = []
    for req in requests:
        lease = pb.PidLease(topic=req.topic, partition=req.partition)
        try:
            name = topic_name(req.topic)
            if req.partition >= 0 and name.partition_index < 0:
                name = name.partition(req.partition)
            topic = await session.service.get_topic(name)
            granted = await topic.dedup.lease(
                session.service.pid_allocator, req.pid,
                req.generation if req.HasField("generation") else None,
                req.expire_ms or DEFAULT_LEASE_MS,
            )
            lease.pid, lease.generation = granted.pid, granted.generation
            lease.sequence_number, lease.expire_ms = granted.next_sequence, granted.expire_ms
        except BrokerError as exc:
            lease.error, lease.message = exc.code, str(exc)
        except (StorageError, MetadataError, OSError) as exc:  # the disk is full or failing: the client retries
            log.warning("lease on %s failed: storage: %s", req.topic, exc)
            lease.error, lease.message = ServerError.ServiceNotReady, f"lease failed: {exc}"
        except Exception as exc:
            log.exception("lease on %s failed", req.topic)
            lease.error, lease.message = ServerError.ServiceNotReady, f"lease failed: {exc}"
        leases.append(lease)
    session.write(command(Type.LEASE_PID_RESPONSE, request_id=request_id, leases=leases))
