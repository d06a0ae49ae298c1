"""AsyncClient: the asyncio entry point.

One client holds a pool of broker connections (one per broker URL, shared by
all its producers and consumers) and hands out producers, consumers and
readers. Every coroutine must run on the loop the client was first used on.

    client = AsyncClient("pulsar://localhost:6650")
    producer = await client.create_producer("my-topic")
    await producer.send(b"hello")
    consumer = await client.subscribe("my-topic", "my-sub")
    msg = await consumer.receive()
    consumer.acknowledge(msg)
    await client.close()
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import uuid
from typing import TYPE_CHECKING, Any, Callable, Mapping

from magnetar.protocol import Type, command, pb

from .auth import Authentication, AuthenticationTLS
from .connection import BrokerConnection, is_tls_url, open_connection
from .consumer import AsyncConsumer
from .enums import CompressionType, ConsumerType, InitialPosition, ProducerAccessMode
from .errors import (AlreadyClosed, ConnectError, InvalidConfiguration, LookupError, OperationNotSupported,
                     ServiceUnitNotReady, Timeout)
from .link import BrokerLink
from .message_id import MessageId
from .partition_routing import HashingScheme, PartitionsRoutingMode, router
from .partitioned import PartitionedConsumer, PartitionedProducer
from .producer import AsyncProducer
from .reader import AsyncReader
from .service_hosts import ServiceHosts

if TYPE_CHECKING:
    from .table_view import AsyncTableView
from .topic import full_topic_name, partition_name

log = logging.getLogger(__name__)

MAX_LOOKUP_REDIRECTS = 20


def tls_context(trust_file: str | None, allow_insecure: bool, validate_hostname: bool,
                 cert_file: str | None, key_file: str | None,
                 authentication: Authentication | None) -> ssl.SSLContext:
    """The context every pulsar+ssl connection of a client uses (the
    client's TLS options, in the constructor's order).

    Built once, eagerly, so that a missing or unusable file is an
    InvalidConfiguration from the constructor and not a retried failure on
    every connection attempt. Its CA defaults to the system's, as the
    official client's does. Public so that a broker can check its replicators'
    settings at start.
    """
    # Imported here: the security package pulls in JWT support a plain client never needs.
    from magnetar.security.tls import TlsSetupError, client_context

    if isinstance(authentication, AuthenticationTLS):
        cert_file, key_file = authentication.certificate_path, authentication.private_key_path
    if bool(cert_file) != bool(key_file):
        raise InvalidConfiguration("a TLS client certificate needs both tls_certificate_file_path "
                                   "and tls_private_key_file_path")
    try:
        return client_context(trust_file or "", cert_file or "", key_file or "",
                              validate_hostname=validate_hostname, allow_insecure=allow_insecure)
    except TlsSetupError as exc:
        raise InvalidConfiguration(str(exc)) from None


class AsyncClient:
    """Raises InvalidUrl at once for a malformed ``service_url``; everything
    else (unreachable broker, ...) surfaces from the first operation.

    ``service_url`` may name several brokers, as Pulsar's clients allow:
    ``pulsar://h1:6650,h2:6650,h3:6651`` (see :mod:`.service_hosts`).
    Lookups and partition counts go to the first that answers, in the order
    given, the time left shared among those not tried yet; the client stays
    on the one that worked until it fails in turn.

    ``authentication``: an :class:`~.auth.AuthenticationToken`,
    :class:`~.auth.AuthenticationBasic` or :class:`~.auth.AuthenticationTLS`
    presented on every connection (a refused one fails operations with
    AuthenticationError).

    TLS, with the official client's option names and defaults: a
    ``pulsar+ssl://`` service URL (or ``use_tls=True``) connects over TLS;
    the broker's certificate must chain to ``tls_trust_certs_file_path``
    (default: the system's CAs); its host name is checked only with
    ``tls_validate_hostname=True``; ``tls_allow_insecure_connection=True``
    accepts any certificate. A client certificate comes from
    ``AuthenticationTLS`` (or ``tls_certificate_file_path`` and
    ``tls_private_key_file_path``). A trust, certificate or key file that is
    missing or unusable raises InvalidConfiguration here; a broker that is
    not trusted fails operations with a ConnectError that says so (met while
    a producer or consumer registers, it is retried until the operation
    timeout, whose Timeout names it as the last error). Over TLS a lookup is
    followed only to the broker's ``brokerServiceUrlTls``."""

    def __init__(self, service_url: str, operation_timeout_seconds: float = 30, *,
                 connection_timeout_ms: int = 10000, keep_alive_interval_seconds: float = 30,
                 backoff_initial_seconds: float = 0.1, backoff_max_seconds: float = 30.0,
                 authentication: Authentication | None = None, use_tls: bool = False,
                 tls_trust_certs_file_path: str | None = None, tls_allow_insecure_connection: bool = False,
                 tls_validate_hostname: bool = False, tls_certificate_file_path: str | None = None,
                 tls_private_key_file_path: str | None = None) -> None:
        # Parsed first: a bad URL is an InvalidUrl whatever the other options say.
        ServiceHosts(service_url)
        if use_tls and service_url.startswith("pulsar://"):
            # The official client's use_tls: the same host and port, over TLS.
            service_url = "pulsar+ssl://" + service_url[len("pulsar://"):]
        self.authentication = authentication
        # None on a plain client: its connections hand on only plain URLs
        # (BrokerConnection.pick_url), so it never meets a pulsar+ssl one.
        self._tls_context: ssl.SSLContext | None = None
        if (is_tls_url(service_url) or tls_trust_certs_file_path or tls_certificate_file_path
                or isinstance(authentication, AuthenticationTLS)):
            self._tls_context = tls_context(tls_trust_certs_file_path, tls_allow_insecure_connection,
                                            tls_validate_hostname, tls_certificate_file_path,
                                            tls_private_key_file_path, authentication)
        self.service_url = service_url.rstrip("/")
        self._service_hosts = ServiceHosts(self.service_url)
        self.operation_timeout = float(operation_timeout_seconds)
        self.connection_timeout = connection_timeout_ms / 1000
        self.keepalive_seconds = keep_alive_interval_seconds
        self.backoff_initial = backoff_initial_seconds
        self.backoff_max = backoff_max_seconds
        self._request_ids = itertools.count()
        self._producer_ids = itertools.count()
        self._consumer_ids = itertools.count()
        self._connections: dict[str, asyncio.Task] = {}
        self._links: set[BrokerLink] = set()
        self._closed = False

    # -- plumbing used by producers and consumers -------------------------------------
    def new_request_id(self) -> int:
        return next(self._request_ids)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosed("client is closed")

    async def connection_to(self, url: str, timeout: float | None = None) -> BrokerConnection:
        """The pooled connection to ``url``, connecting if needed.

        Raises ConnectError / Timeout / InvalidUrl; a failed attempt is not
        cached, so the next call tries again.
        """
        self._check_open()
        task = self._connections.get(url)
        if task is not None and task.done() and (task.cancelled() or task.exception() is not None
                                                 or task.result().closed.done()):
            task = None
        if task is None:
            task = asyncio.get_running_loop().create_task(
                open_connection(url, min(timeout or self.connection_timeout, self.connection_timeout),
                                self.keepalive_seconds, self.authentication, self._tls_context))
            self._connections[url] = task
            task.add_done_callback(lambda t, url=url: self._connection_settled(url, t))
        return await asyncio.shield(task)

    def _connection_settled(self, url: str, task: asyncio.Task) -> None:
        if task.cancelled() or task.exception() is not None:
            if self._connections.get(url) is task:
                del self._connections[url]
            return
        conn = task.result()

        def forget(_: object) -> None:
            if self._connections.get(url) is task:
                del self._connections[url]

        conn.closed.add_done_callback(forget)

    async def ask_any_host(self, cmd_for: Callable[[], pb.BaseCommand], timeout: float | None = None) -> pb.BaseCommand:
        """The reply to a request any broker answers alike (a namespace's
        topics, a topic's schema), from a host of the service URL, tried
        as :meth:`_ask_service_host` tries them (a service URL may name
        several brokers). ``cmd_for`` makes the command (a fresh request id
        per try)."""
        reply, _ = await self._ask_service_host(cmd_for, self.operation_timeout if timeout is None else timeout)
        return reply

    async def _ask_service_host(self, cmd_for: Callable[[], pb.BaseCommand],
                                timeout: float) -> tuple[pb.BaseCommand, str]:
        """Send a request to a host of the service URL: ``(reply, host URL)``.

        The hosts are tried in :meth:`ServiceHosts.in_order`; one that cannot
        be reached (ConnectError) or does not answer in its share of
        ``timeout`` (Timeout) is marked failed and the next one is asked.
        Each untried host gets an equal share of the time left, so a paused
        broker at the head of the list cannot take all of it. An error
        answer (ServiceNotReady, ...) comes from a live broker and is raised
        as is; after a ServiceUnitNotReady (a broker out of its metadata
        session says "try another broker") the next call starts with the
        next host, since any host answers lookups as well as another. Raises
        the last host's ConnectError or Timeout when none answered.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        hosts = self._service_hosts.in_order()
        last: Exception | None = None
        for tried, url in enumerate(hosts):
            left = deadline - loop.time()
            if left <= 0:
                break
            share = left / (len(hosts) - tried)
            try:
                conn = await self.connection_to(url, share)
                return await conn.request(cmd_for(), share), url
            except ServiceUnitNotReady:
                # Raised, not retried here: the caller's backoff paces the
                # retry (the bundle may be moving, and every host would say so).
                self._service_hosts.failed(url)
                raise
            except (ConnectError, Timeout) as exc:
                if len(hosts) > 1:
                    log.info("service host %s failed (%s); trying the next", url, exc)
                self._service_hosts.failed(url)
                last = exc
        raise last or Timeout(f"no host of {self.service_url} answered within {timeout:.1f} s")

    async def lookup(self, topic: str, timeout: float | None = None) -> str:
        """The service URL of the broker that serves ``topic`` (following redirects)."""
        timeout = self.operation_timeout if timeout is None else timeout

        def ask(authoritative: bool = False) -> pb.BaseCommand:
            return command(Type.LOOKUP, topic=topic, request_id=self.new_request_id(), authoritative=authoritative)

        answer, service_host = await self._ask_service_host(ask, timeout)
        for _ in range(MAX_LOOKUP_REDIRECTS):
            reply = answer.lookupTopicResponse
            if reply.proxy_through_service_url:
                return service_host
            url = self._broker_url(reply, service_host)
            if reply.response == pb.CommandLookupTopicResponse.Connect:
                return url
            conn = await self.connection_to(url, timeout)
            answer = await conn.request(ask(reply.authoritative), timeout)
        raise LookupError(f"lookup of {topic} redirected more than {MAX_LOOKUP_REDIRECTS} times")

    def _broker_url(self, reply: pb.CommandLookupTopicResponse, service_host: str) -> str:
        """The URL a lookup answer names, on this client's transport: over TLS
        only ``brokerServiceUrlTls`` will do (as the official client), since
        following the plain URL would drop encryption without saying so. An
        answer naming no broker means the host that answered."""
        if not is_tls_url(self.service_url):
            return reply.brokerServiceUrl or service_host
        if reply.brokerServiceUrlTls:
            return reply.brokerServiceUrlTls
        if not reply.brokerServiceUrl:
            return service_host
        raise LookupError(f"the broker named {reply.brokerServiceUrl} for a TLS client without a "
                          f"brokerServiceUrlTls: does that broker have a tls_port?")

    async def _partitions(self, topic: str) -> int:
        reply, _ = await self._ask_service_host(
            lambda: command(Type.PARTITIONED_METADATA, topic=topic, request_id=self.new_request_id()),
            self.operation_timeout)
        return reply.partitionMetadataResponse.partitions

    def _forget(self, link: BrokerLink) -> None:
        self._links.discard(link)

    async def _start(self, link: BrokerLink) -> None:
        self._links.add(link)
        try:
            await link._create()
        except BaseException:
            self._links.discard(link)
            raise

    async def _single_partition_topic(self, topic: str) -> str:
        topic = full_topic_name(topic)
        if await self._partitions(topic) > 0:
            # Extension point: a partitioned producer/consumer fanning out
            # over partition_name(topic, i).
            raise OperationNotSupported(f"{topic} is partitioned; use one of its partitions")
        return topic

    # -- public API ------------------------------------------------------------------------
    async def get_topic_partitions(self, topic: str) -> list[str]:
        """The partition topics of ``topic``, or ``[topic]`` if it is not partitioned."""
        self._check_open()
        topic = full_topic_name(topic)
        n = await self._partitions(topic)
        return [partition_name(topic, i) for i in range(n)] if n > 0 else [topic]

    async def create_producer(
        self, topic: str, producer_name: str | None = None, initial_sequence_id: int | None = None,
        send_timeout_millis: int = 30000, compression_type: CompressionType = CompressionType.NONE,
        max_pending_messages: int = 1000, block_if_queue_full: bool = False, batching_enabled: bool = False,
        batching_max_messages: int = 1000, batching_max_allowed_size_in_bytes: int = 128 * 1024,
        batching_max_publish_delay_ms: int = 10, properties: Mapping[str, str] | None = None,
        access_mode: ProducerAccessMode = ProducerAccessMode.Shared, idempotent: bool = False,
        pid: int | None = None, pid_lease_ms: int = 60000,
        message_routing_mode: PartitionsRoutingMode = PartitionsRoutingMode.RoundRobinDistribution,
        hashing_scheme: HashingScheme = HashingScheme.JavaStringHash,
        message_router: Callable[[Any, int], int] | None = None, schema: pb.Schema | None = None,
    ) -> AsyncProducer | PartitionedProducer:
        """A connected producer. Raises ProducerBusy / ProducerFenced /
        TopicNotFound ... at once, Timeout if retryable errors persist for
        the operation timeout.

        ``idempotent=True`` leases a producer id for the topic (renewed every
        ``pid_lease_ms / 2``) and numbers every message, so retries never
        store a message twice (see :mod:`.idempotence`). ``pid=`` resumes a
        known identity instead (a takeover: the generation moves up, which
        fences any older holder, and numbering continues where the broker's
        stops); NotAllowedError if the broker no longer knows that pid.

        ``schema`` (a protocol Schema) is announced to the broker, which
        registers it or refuses it (IncompatibleSchema); messages are not
        encoded by it: :attr:`AsyncProducer.schema_version` is its version.

        On a partitioned topic: a :class:`~.partitioned.PartitionedProducer`
        (one producer per partition, under one name), routed by
        ``message_routing_mode``, ``hashing_scheme`` and ``message_router``
        (see :mod:`.partition_routing`).
        """
        self._check_open()
        topic = full_topic_name(topic)
        partitions = await self._partitions(topic)
        if partitions > 0 and pid is not None:
            raise InvalidConfiguration("pid= resumes one partition's identity: give TOPIC-partition-N")
        route = router(max(partitions, 1), message_routing_mode, hashing_scheme, message_router)

        async def connect(name: str, producer_name: str | None) -> AsyncProducer:
            producer = AsyncProducer(
                self, name, next(self._producer_ids), producer_name=producer_name,
                initial_sequence_id=initial_sequence_id, send_timeout_millis=send_timeout_millis,
                compression_type=compression_type, max_pending_messages=max_pending_messages,
                block_if_queue_full=block_if_queue_full, batching_enabled=batching_enabled,
                batching_max_messages=batching_max_messages,
                batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
                batching_max_publish_delay_ms=batching_max_publish_delay_ms, access_mode=access_mode,
                properties=properties, idempotent=idempotent, pid=pid, pid_lease_ms=pid_lease_ms, schema=schema,
            )
            await self._start(producer)
            return producer

        if partitions == 0:
            return await connect(topic, producer_name)
        first = await connect(partition_name(topic, 0), producer_name)
        name = producer_name or first.producer_name()  # every partition under one name, as in Pulsar
        rest = await asyncio.gather(*(connect(partition_name(topic, i), name) for i in range(1, partitions)),
                                    return_exceptions=True)
        failed = next((r for r in rest if isinstance(r, BaseException)), None)
        if failed is not None:
            await asyncio.gather(first.close(), *(r.close() for r in rest if not isinstance(r, BaseException)),
                                 return_exceptions=True)
            raise failed
        return PartitionedProducer(topic, [first, *rest], route)  # type: ignore[list-item]

    async def get_next_offset(self, topic: str) -> int:
        """The offset the next message appended to ``topic`` will get: the
        number of messages ever appended (offsets are dense from 0), what a
        conditional send expects to append at the end. Raises
        OperationNotSupported for a partitioned topic (ask per partition),
        TopicNotFound, Timeout."""
        self._check_open()
        topic = await self._single_partition_topic(topic)
        conn = await self.connection_to(await self.lookup(topic), self.operation_timeout)
        reply = await conn.request(command(Type.GET_NEXT_OFFSET, request_id=self.new_request_id(), topic=topic),
                                   self.operation_timeout)
        return reply.getNextOffsetResponse.next_offset

    async def subscribe(
        self, topic: str, subscription_name: str, consumer_type: ConsumerType = ConsumerType.Exclusive,
        receiver_queue_size: int = 1000, consumer_name: str | None = None,
        unacked_messages_timeout_ms: int | None = None, negative_ack_redelivery_delay_ms: int = 60000,
        is_read_compacted: bool = False, properties: Mapping[str, str] | None = None,
        initial_position: InitialPosition = InitialPosition.Latest,
        replicate_subscription_state_enabled: bool = False, ack_group_time_ms: int = 100,
    ) -> AsyncConsumer | PartitionedConsumer:
        """A subscribed consumer (on a partitioned topic, a
        :class:`~.partitioned.PartitionedConsumer` over every partition).
        Raises ConsumerBusy / TopicNotFound ... at once, Timeout if retryable
        errors persist for the operation timeout."""
        self._check_open()
        if not isinstance(topic, str):
            raise OperationNotSupported("multi-topic subscriptions are not supported yet")
        if not subscription_name:
            raise InvalidConfiguration("subscription_name is required")
        topic = full_topic_name(topic)
        partitions = await self._partitions(topic)

        async def connect(name: str) -> AsyncConsumer:
            consumer = AsyncConsumer(
                self, name, subscription_name, next(self._consumer_ids), consumer_type=consumer_type,
                initial_position=initial_position, receiver_queue_size=receiver_queue_size,
                consumer_name=consumer_name, negative_ack_redelivery_delay_ms=negative_ack_redelivery_delay_ms,
                unacked_messages_timeout_ms=unacked_messages_timeout_ms, ack_group_time_ms=ack_group_time_ms,
                properties=properties, is_read_compacted=is_read_compacted,
                replicate_subscription_state_enabled=replicate_subscription_state_enabled,
            )
            await self._start(consumer)
            return consumer

        if partitions == 0:
            return await connect(topic)
        made = await asyncio.gather(*(connect(partition_name(topic, i)) for i in range(partitions)),
                                    return_exceptions=True)
        failed = next((r for r in made if isinstance(r, BaseException)), None)
        if failed is not None:
            await asyncio.gather(*(r.close() for r in made if not isinstance(r, BaseException)),
                                 return_exceptions=True)
            raise failed
        return PartitionedConsumer(topic, made)  # type: ignore[arg-type]

    async def create_reader(
        self, topic: str, start_message_id: MessageId, start_message_id_inclusive: bool = False,
        receiver_queue_size: int = 1000, reader_name: str | None = None,
        subscription_role_prefix: str | None = None, is_read_compacted: bool = False,
    ) -> AsyncReader:
        """A reader positioned at ``start_message_id``."""
        self._check_open()
        if not isinstance(start_message_id, MessageId):
            raise InvalidConfiguration("start_message_id must be a MessageId")
        topic = await self._single_partition_topic(topic)
        subscription = f"{subscription_role_prefix or 'reader'}-{uuid.uuid4().hex[:10]}"
        consumer = AsyncConsumer(
            self, topic, subscription, next(self._consumer_ids), consumer_type=ConsumerType.Exclusive,
            receiver_queue_size=receiver_queue_size, consumer_name=reader_name,
            is_read_compacted=is_read_compacted, durable=False, start_message_id=start_message_id,
            start_message_id_inclusive=start_message_id_inclusive,
        )
        await self._start(consumer)
        return AsyncReader(consumer)

    async def create_table_view(self, topic: str) -> "AsyncTableView":
        """A key -> latest value map of ``topic`` (see :mod:`.table_view`)."""
        from .table_view import AsyncTableView

        return await AsyncTableView.create(self, topic)

    async def close(self) -> None:
        """Close every producer, consumer and connection. Idempotent."""
        if self._closed:
            return
        for link in list(self._links):
            try:
                await link.close()
            except Exception:
                log.exception("error closing %s on %s", link.kind, link.topic())
        self._closed = True
        tasks = list(self._connections.values())
        self._connections.clear()
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is None:
                task.result().close("client closed")
            else:
                task.cancel()
