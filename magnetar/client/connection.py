"""The I/O shell around the sans-io protocol: one TCP (or TLS) connection to a broker.

A :class:`BrokerConnection` performs the CONNECT handshake, matches replies
to requests by ``request_id``, routes frames addressed to a producer or a
consumer to the object registered under that id, answers PINGs and sends its
own every ``keepalive_seconds`` (a connection that stays silent for two
intervals is declared dead).

When the connection ends, for whatever reason, every pending request fails
with ConnectError and every registered producer/consumer is told through
``connection_lost(conn)``; they reconnect on their own.

``pulsar+ssl://`` URLs are reached over TLS with the context the client
built (:func:`open_connection`'s ``ssl_context``); a broker whose certificate
does not verify fails the connection with a ConnectError naming the reason.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Protocol
from urllib.parse import urlsplit

from magnetar.protocol import Connection, ProtocolError, Role, ServerError, State, Type, command, pb
from magnetar.protocol.commands import body, type_name
from magnetar.protocol.frames import Frame

from .auth import Authentication
from .errors import AuthenticationError, ConnectError, InvalidUrl, PulsarError, Timeout, from_server_error

log = logging.getLogger(__name__)

CLIENT_VERSION = "Magnetar-Python-0.1.0"
PROTOCOL_VERSION = 20

_RESPONSES = frozenset({
    Type.SUCCESS, Type.ERROR, Type.PRODUCER_SUCCESS, Type.PARTITIONED_METADATA_RESPONSE,
    Type.LOOKUP_RESPONSE, Type.GET_LAST_MESSAGE_ID_RESPONSE, Type.ACK_RESPONSE,
    Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, Type.GET_SCHEMA_RESPONSE, Type.CONSUMER_STATS_RESPONSE,
    Type.GET_OR_CREATE_SCHEMA_RESPONSE, Type.LEASE_PID_RESPONSE, Type.GET_NEXT_OFFSET_RESPONSE,
})


class ProducerEndpoint(Protocol):
    def on_send_receipt(self, receipt: pb.CommandSendReceipt) -> None: ...
    def on_send_error(self, error: pb.CommandSendError) -> None: ...
    def on_closed_by_broker(self, conn: "BrokerConnection", assigned_url: str | None) -> None: ...
    def connection_lost(self, conn: "BrokerConnection") -> None: ...


class ConsumerEndpoint(Protocol):
    def on_message(self, cmd: pb.CommandMessage, frame: Frame) -> None: ...
    def on_active_consumer_change(self, active: bool) -> None: ...
    def on_reached_end_of_topic(self) -> None: ...
    def on_closed_by_broker(self, conn: "BrokerConnection", assigned_url: str | None) -> None: ...
    def connection_lost(self, conn: "BrokerConnection") -> None: ...


TLS_SCHEME = "pulsar+ssl"


def parse_service_url(url: str) -> tuple[str, int]:
    """(host, port) of a ``pulsar://host:port`` or ``pulsar+ssl://host:port``
    URL (default ports 6650 and 6651, Pulsar's); raises InvalidUrl."""
    parts = urlsplit(url)
    if parts.scheme not in ("pulsar", TLS_SCHEME) or not parts.hostname:
        raise InvalidUrl(f"unsupported service URL {url!r} (expected pulsar://host:port or pulsar+ssl://host:port)")
    try:
        port = parts.port
    except ValueError:
        raise InvalidUrl(f"service URL {url!r} has a bad port") from None
    return parts.hostname, port or (6651 if parts.scheme == TLS_SCHEME else 6650)


def is_tls_url(url: str) -> bool:
    """Whether ``url`` is reached over TLS (``pulsar+ssl://``)."""
    return url.startswith(TLS_SCHEME + "://")


class BrokerConnection(asyncio.BufferedProtocol):
    """One connection; create it with :func:`open_connection`.

    A buffered protocol: the transport receives into the buffer the frame
    decoder offers, so a large frame (a fetch response) is received in
    place, with no copy (:meth:`.FrameDecoder.receive_buffer`)."""

    def __init__(self, url: str, keepalive_seconds: float = 30.0, authentication: Authentication | None = None) -> None:
        self.url = url
        #: Over TLS: the broker URLs this connection hands on (redirects) must be pulsar+ssl too.
        self.tls = is_tls_url(url)
        self.authentication = authentication or Authentication()
        self.keepalive_seconds = keepalive_seconds
        self.max_message_size = 5 * 1024 * 1024
        self._proto = Connection(Role.CLIENT)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, tuple[asyncio.Future, asyncio.TimerHandle | None]] = {}
        self._producers: dict[int, ProducerEndpoint] = {}
        self._consumers: dict[int, ConsumerEndpoint] = {}
        self._connected: asyncio.Future = self._loop.create_future()
        self.closed: asyncio.Future = self._loop.create_future()
        self._heard_from_peer = True
        self._keepalive: asyncio.TimerHandle | None = None

    # -- lifecycle -------------------------------------------------------------
    @property
    def is_open(self) -> bool:
        return self._proto.state is State.CONNECTED and not self.closed.done()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        flags = pb.FeatureFlags(supports_auth_refresh=True, supports_broker_entry_metadata=True)
        auth = self.authentication
        self._write(self._proto.send(command(
            Type.CONNECT, client_version=CLIENT_VERSION, auth_method_name=auth.method,
            auth_data=auth.data() if auth.method != "none" else None,
            protocol_version=PROTOCOL_VERSION, feature_flags=flags,
        )))

    async def wait_connected(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._connected), timeout)
        except asyncio.TimeoutError:
            self.close(f"no CONNECTED within {timeout}s")
            raise Timeout(f"handshake with {self.url} timed out") from None

    def connection_lost(self, exc: Exception | None) -> None:
        detail = f": {exc}" if exc else ""
        if exc is None and self.tls and not self._connected.done():
            # asyncio logs a TLS alert from the peer and reports a plain close:
            # the usual cause of a close before CONNECTED is our certificate.
            detail = (" before CONNECTED: the broker closed the TLS connection (did it refuse this client's "
                      "certificate? it must chain to the broker's tls_trust_certs_file)")
        self._shutdown(ConnectError(f"connection to {self.url} lost{detail}"))

    def close(self, reason: str = "closed by client") -> None:
        """Close the connection; pending requests fail with ConnectError."""
        if self._transport is not None:
            self._transport.close()
        self._shutdown(ConnectError(f"connection to {self.url} closed: {reason}"))

    def _shutdown(self, error: PulsarError) -> None:
        if self.closed.done():
            return
        self._proto.close()
        self.closed.set_result(None)
        if self._keepalive is not None:
            self._keepalive.cancel()
        if not self._connected.done():
            self._connected.set_exception(error)
            self._connected.exception()  # retrieved: nobody may be waiting
        pending, self._pending = self._pending, {}
        for fut, timer in pending.values():
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(error)
        endpoints = list(self._producers.values()) + list(self._consumers.values())
        self._producers.clear()
        self._consumers.clear()
        for endpoint in endpoints:
            endpoint.connection_lost(self)

    def pick_url(self, plain: str, tls: str) -> str | None:
        """The broker URL to follow from a (plain, TLS) pair the broker sent:
        a TLS connection never falls back to plain text (None: look up again)."""
        return (tls or None) if self.tls else (plain or None)

    # -- writing -----------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(data)

    def send_command(self, cmd: pb.BaseCommand) -> None:
        """Send a command that expects no reply; a no-op once closed."""
        if self.closed.done():
            return
        self._write(self._proto.send(cmd))

    def send_raw_frame(self, frame: bytes) -> None:
        """Send an already encoded frame (a SEND); a no-op once closed."""
        if self.is_open:
            self._write(frame)

    async def request(self, cmd: pb.BaseCommand, timeout: float | None) -> pb.BaseCommand:
        """Send ``cmd`` (its sub-message carries ``request_id``) and return the reply.

        Raises the mapped PulsarError for ERROR replies and failed lookups,
        Timeout after ``timeout`` seconds, ConnectError if the connection ends.
        A PRODUCER_SUCCESS with producer_ready=false (queued for exclusive
        access) stops the timeout: the request then waits until promoted.
        """
        return await self.request_future(cmd, timeout)

    def request_future(self, cmd: pb.BaseCommand, timeout: float | None) -> asyncio.Future:
        """:meth:`request` for a caller that cannot await: sends ``cmd`` now and
        returns the future of its reply (the same results and errors)."""
        if not self.is_open:
            raise ConnectError(f"connection to {self.url} is closed")
        request_id = body(cmd).request_id
        fut = self._loop.create_future()
        timer = None
        if timeout is not None:
            timer = self._loop.call_later(timeout, self._time_out, request_id, type_name(cmd), timeout)
        self._pending[request_id] = (fut, timer)
        self._write(self._proto.send(cmd))
        return fut

    def _time_out(self, request_id: int, what: str, timeout: float) -> None:
        fut, _ = self._pending.pop(request_id, (None, None))
        if fut is not None and not fut.done():
            fut.set_exception(Timeout(f"{what} got no reply within {timeout}s"))

    # -- routing -----------------------------------------------------------------
    def attach_producer(self, producer_id: int, endpoint: ProducerEndpoint) -> None:
        self._producers[producer_id] = endpoint

    def attach_consumer(self, consumer_id: int, endpoint: ConsumerEndpoint) -> None:
        self._consumers[consumer_id] = endpoint

    def detach_producer(self, producer_id: int, endpoint: object = None) -> None:
        if endpoint is None or self._producers.get(producer_id) is endpoint:
            self._producers.pop(producer_id, None)

    def detach_consumer(self, consumer_id: int, endpoint: object = None) -> None:
        if endpoint is None or self._consumers.get(consumer_id) is endpoint:
            self._consumers.pop(consumer_id, None)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._proto.decoder.receive_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._proto.decoder.received(nbytes)
        self.data_received(None)

    def data_received(self, data: bytes | None) -> None:
        self._heard_from_peer = True
        try:
            frames = self._proto.receive_data(data)
        except ProtocolError as exc:
            log.warning("closing %s: %s", self.url, exc)
            self.close(f"protocol error: {exc}")
            return
        for frame in frames:
            try:
                self._dispatch(frame)
            except Exception:  # one bad frame handler must not kill the connection's peers
                log.exception("error handling %s from %s", type_name(frame.command), self.url)

    def _dispatch(self, frame: Frame) -> None:
        cmd = frame.command
        t = cmd.type
        if t == Type.MESSAGE:
            consumer = self._consumers.get(cmd.message.consumer_id)
            if consumer is not None:
                consumer.on_message(cmd.message, frame)
        elif t == Type.SEND_RECEIPT:
            producer = self._producers.get(cmd.send_receipt.producer_id)
            if producer is not None:
                producer.on_send_receipt(cmd.send_receipt)
        elif t in _RESPONSES:
            self._resolve(cmd)
        elif t == Type.FETCH_ENTRIES_RESPONSE:
            self._resolve(cmd, frame)  # the entries follow the command: the caller takes the frame
        elif t == Type.SEND_ERROR:
            producer = self._producers.get(cmd.send_error.producer_id)
            if producer is not None:
                producer.on_send_error(cmd.send_error)
        elif t == Type.PING:
            self.send_command(command(Type.PONG))
        elif t == Type.AUTH_CHALLENGE:
            # The broker asks again (an expiring credential): answer with a fresh one.
            auth = self.authentication
            self.send_command(command(
                Type.AUTH_RESPONSE, client_version=CLIENT_VERSION, protocol_version=PROTOCOL_VERSION,
                response=pb.AuthData(auth_method_name=auth.method, auth_data=auth.data())))
        elif t == Type.PONG:
            pass
        elif t == Type.CLOSE_PRODUCER:
            producer = self._producers.pop(cmd.close_producer.producer_id, None)
            if producer is not None:
                producer.on_closed_by_broker(self, self.pick_url(cmd.close_producer.assignedBrokerServiceUrl,
                                                                 cmd.close_producer.assignedBrokerServiceUrlTls))
        elif t == Type.CLOSE_CONSUMER:
            consumer = self._consumers.pop(cmd.close_consumer.consumer_id, None)
            if consumer is not None:
                consumer.on_closed_by_broker(self, self.pick_url(cmd.close_consumer.assignedBrokerServiceUrl,
                                                                 cmd.close_consumer.assignedBrokerServiceUrlTls))
        elif t == Type.ACTIVE_CONSUMER_CHANGE:
            consumer = self._consumers.get(cmd.active_consumer_change.consumer_id)
            if consumer is not None:
                consumer.on_active_consumer_change(cmd.active_consumer_change.is_active)
        elif t == Type.REACHED_END_OF_TOPIC:
            consumer = self._consumers.get(cmd.reachedEndOfTopic.consumer_id)
            if consumer is not None:
                consumer.on_reached_end_of_topic()
        elif t == Type.TOPIC_MIGRATED:
            migrated = cmd.topicMigrated
            table = self._producers if migrated.resource_type == migrated.Producer else self._consumers
            endpoint = table.pop(migrated.resource_id, None)
            if endpoint is not None:
                endpoint.on_closed_by_broker(self, self.pick_url(migrated.brokerServiceUrl, migrated.brokerServiceUrlTls))
        elif t == Type.CONNECTED:
            self.max_message_size = cmd.connected.max_message_size or self.max_message_size
            self._schedule_keepalive()
            if not self._connected.done():
                self._connected.set_result(None)
        else:
            log.debug("ignoring %s from %s", type_name(cmd), self.url)

    def _resolve(self, cmd: pb.BaseCommand, frame: Frame | None = None) -> None:
        reply = body(cmd)
        request_id = reply.request_id
        if cmd.type == Type.ERROR and not self._connected.done():
            # An ERROR during the handshake (request id meaningless) ends it.
            if reply.error == ServerError.AuthenticationError:
                self._connected.set_exception(AuthenticationError(f"{self.url} refused the credential: "
                                                                  f"{reply.message}"))
            self.close(f"handshake refused: {reply.message}")
            return
        if cmd.type == Type.PRODUCER_SUCCESS and not reply.producer_ready:
            entry = self._pending.get(request_id)
            if entry is not None and entry[1] is not None:
                entry[1].cancel()
                self._pending[request_id] = (entry[0], None)
            return
        fut, timer = self._pending.pop(request_id, (None, None))
        if fut is None or fut.done():
            return
        if timer is not None:
            timer.cancel()
        error = _reply_error(cmd)
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(cmd if frame is None else frame)

    # -- keepalive ---------------------------------------------------------------
    def _schedule_keepalive(self) -> None:
        if self.keepalive_seconds > 0:
            self._keepalive = self._loop.call_later(self.keepalive_seconds, self._keepalive_tick)

    def _keepalive_tick(self) -> None:
        if self.closed.done():
            return
        if not self._heard_from_peer:
            # Two intervals of silence even though we pinged: the peer is gone
            # even if TCP has not noticed yet.
            self.close("keepalive: no reply to PING")
            return
        self._heard_from_peer = False
        self.send_command(command(Type.PING))
        self._schedule_keepalive()


def _reply_error(cmd: pb.BaseCommand) -> PulsarError | None:
    t = cmd.type
    if t == Type.ERROR:
        return from_server_error(cmd.error.error, cmd.error.message)
    if t == Type.LOOKUP_RESPONSE and cmd.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Failed:
        r = cmd.lookupTopicResponse
        return from_server_error(r.error, r.message or "lookup failed")
    if (t == Type.PARTITIONED_METADATA_RESPONSE
            and cmd.partitionMetadataResponse.response == pb.CommandPartitionedTopicMetadataResponse.Failed):
        r = cmd.partitionMetadataResponse
        return from_server_error(r.error, r.message or "partitioned metadata lookup failed")
    if t == Type.ACK_RESPONSE and cmd.ackResponse.HasField("error"):
        return from_server_error(cmd.ackResponse.error, cmd.ackResponse.message)
    if t == Type.GET_NEXT_OFFSET_RESPONSE and cmd.getNextOffsetResponse.HasField("error"):
        return from_server_error(cmd.getNextOffsetResponse.error, cmd.getNextOffsetResponse.message)
    if t == Type.FETCH_ENTRIES_RESPONSE and cmd.fetchEntriesResponse.HasField("error"):
        return from_server_error(cmd.fetchEntriesResponse.error, cmd.fetchEntriesResponse.message)
    return None


async def open_connection(url: str, timeout: float, keepalive_seconds: float = 30.0,
                          authentication: Authentication | None = None,
                          ssl_context: ssl.SSLContext | None = None) -> BrokerConnection:
    """Connect to ``url`` and complete the handshake; a ``pulsar+ssl://``
    URL over TLS with ``ssl_context`` (required for it).

    Raises InvalidUrl, ConnectError (refused, reset, handshake refused, a
    TLS handshake that fails: untrusted certificate, host name mismatch, our
    certificate refused) or Timeout.
    """
    host, port = parse_service_url(url)
    tls = is_tls_url(url)
    if tls and ssl_context is None:
        raise InvalidUrl(f"{url} needs TLS, but this client has no TLS settings")
    loop = asyncio.get_running_loop()
    try:
        _, conn = await asyncio.wait_for(
            loop.create_connection(lambda: BrokerConnection(url, keepalive_seconds, authentication), host, port,
                                   ssl=ssl_context if tls else None, server_hostname=host if tls else None),
            timeout)
    except asyncio.TimeoutError:
        raise Timeout(f"connecting to {url} timed out") from None
    except ssl.SSLCertVerificationError as exc:
        raise ConnectError(f"TLS handshake with {url} failed: the broker's certificate is not trusted "
                           f"({exc.verify_message}); check tls_trust_certs_file_path "
                           f"(and the host name, with tls_validate_hostname)") from None
    except ssl.SSLError as exc:
        raise ConnectError(f"TLS handshake with {url} failed: {exc.reason or exc}") from None
    except OSError as exc:
        raise ConnectError(f"cannot connect to {url}: {exc}") from None
    await conn.wait_connected(timeout)
    return conn
