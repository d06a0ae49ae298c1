"""What a command handler may use of its connection, as a protocol.

Handlers (one module per area: ``lookup``, ``produce``, ``consume``,
``schema``) are plain functions ``(session, request) -> None`` that answer by
writing commands. They never raise to the connection: a refusal is an error
answer with Pulsar's code. The connection shell (``server.connection``)
implements this protocol and routes frames to the handlers; it is the only
place that touches the socket.
"""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

from magnetar.broker.config import BrokerConfig
from magnetar.broker.errors import InvalidTopic
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.topic_name import InvalidTopicName, TopicName, parse
from magnetar.broker.topics.producer import Producer
from magnetar.protocol import Connection, pb

UINT64_MAX = (1 << 64) - 1


class ClientSession(Protocol):
    """One client connection as its handlers see it."""

    #: The broker service (``server.service.BrokerService``).
    service: Any
    config: BrokerConfig
    #: The sans-io protocol state (handshake, peer features).
    proto: Connection
    transport: asyncio.Transport | None
    peer: str
    producers: dict[int, Producer]
    #: Producer id -> request id of the PRODUCER being handled for it. A
    #: CLOSE_PRODUCER meanwhile takes the id out (a retried PRODUCER replaces
    #: the request id), and the creation it interrupted is undone.
    producers_creating: dict[int, int]
    consumers: dict[int, Consumer]
    #: Sends waiting for storage; past a bound the socket stops being read.
    pending_sends: int
    reading_paused: bool
    rate_paused: bool
    throttled: int
    writing_paused: bool
    #: Wall clock (ms) when the chunk being handled was read: its SENDs' publish time.
    received_ms: int

    #: The client's role once authenticated (None: anonymous, or authentication off).
    role: str | None
    #: The client library's version from CONNECT ("" before it).
    client_version: str

    def close(self) -> None:
        """Flush what is queued and close the connection."""

    def write(self, cmd: pb.BaseCommand) -> None:
        """Queue one command for the client."""

    def queue(self, *pieces: bytes) -> None:
        """Queue encoded frames for the client (one socket write per loop pass)."""

    def queue_one(self, frame: bytes) -> None:
        """:meth:`queue` of one frame (a receipt: once per stored entry)."""

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` as a task of this connection (cancelled when it closes)."""


def topic_name(raw: str) -> TopicName:
    """Parse a client's topic name; InvalidTopic (InvalidTopicName) if it is not one."""
    try:
        return parse(raw)
    except InvalidTopicName as exc:
        raise InvalidTopic(str(exc)) from None
