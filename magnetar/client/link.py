"""BrokerLink: a producer's or consumer's registration on a broker, kept alive.

A link finds the broker that owns its topic (LOOKUP), gets a connection to it
from the client's pool and registers there (PRODUCER / SUBSCRIBE: the
subclass's :meth:`_register`). When the connection drops, or the broker
closes the producer/consumer (CLOSE_PRODUCER / CLOSE_CONSUMER, possibly
naming the broker to go to next), the link registers again in the background
with exponential backoff, under the same id.

Creation retries retryable errors until the operation timeout and fails at
once on fatal ones (:func:`errors.is_fatal`). A background reconnect retries
forever, except for errors that end the producer/consumer for good
(fencing, termination), which reach :meth:`_on_fatal`.
"""
from __future__ import annotations

import abc
import asyncio
import enum
import logging
from typing import Protocol

from magnetar.protocol import pb

from .backoff import Backoff
from .connection import BrokerConnection
from .errors import AlreadyClosed, NotConnected, PulsarError, Timeout, is_fatal

log = logging.getLogger(__name__)


class LinkClient(Protocol):
    """What a link uses of its client (``aio.AsyncClient``, which imports this
    module): the connection pool, lookups and the retry settings."""

    operation_timeout: float
    backoff_initial: float
    backoff_max: float

    async def connection_to(self, url: str, timeout: float | None = None) -> BrokerConnection: ...

    async def lookup(self, topic: str, timeout: float | None = None) -> str: ...


class LinkState(enum.Enum):
    CONNECTING = "connecting"   # creating, or re-registering after a loss
    READY = "ready"
    CLOSING = "closing"
    CLOSED = "closed"
    FAILED = "failed"           # ended by a fatal error (fenced, terminated, ...)


class BrokerLink(abc.ABC):
    kind = "link"

    def __init__(self, client: LinkClient, topic: str) -> None:
        self._client = client
        self._topic = topic
        self.conn: BrokerConnection | None = None
        self.state = LinkState.CONNECTING
        self.registrations = 0  # successful registrations so far
        self._backoff = Backoff(client.backoff_initial, client.backoff_max)
        self._assigned_url: str | None = None
        self._reconnector: asyncio.Task | None = None
        self._failure: PulsarError | None = None
        self._ready = asyncio.Event()

    def topic(self) -> str:
        return self._topic

    def is_connected(self) -> bool:
        return self.state is LinkState.READY and self.conn is not None and self.conn.is_open

    # -- subclass hooks ---------------------------------------------------------
    @abc.abstractmethod
    async def _register(self, conn: BrokerConnection, timeout: float) -> None:
        """Attach to ``conn`` and register (PRODUCER/SUBSCRIBE); raise on refusal."""

    @abc.abstractmethod
    def _detach(self, conn: BrokerConnection) -> None:
        """Stop routing ``conn``'s frames to this link."""

    @abc.abstractmethod
    def _unregister_command(self) -> pb.BaseCommand:
        """The command that ends this link's registration (CLOSE_PRODUCER / CLOSE_CONSUMER)."""

    def _on_link_up(self) -> None:
        """Registered and READY: resend what is pending, ask for messages."""

    def _on_link_down(self) -> None:
        """The registration is gone; a reconnect follows."""

    def _on_fatal(self, exc: PulsarError) -> None:
        """The link is over for good (state FAILED)."""

    async def wait_ready(self, timeout: float | None = None) -> BrokerConnection:
        """The current connection once the link is READY.

        Raises NotConnected after ``timeout`` seconds (default: the client's
        operation timeout), AlreadyClosed or the link's fatal error.
        """
        self._check_open()
        if self.state is not LinkState.READY or self.conn is None:
            try:
                await asyncio.wait_for(self._ready.wait(), self._client.operation_timeout if timeout is None else timeout)
            except asyncio.TimeoutError:
                raise NotConnected(f"{self.kind} on {self._topic} is not connected") from None
            self._check_open()
        assert self.conn is not None
        return self.conn

    # -- establishing -------------------------------------------------------------
    def _check_open(self) -> None:
        if self.state is LinkState.FAILED and self._failure is not None:
            raise self._failure
        if self.state in (LinkState.CLOSING, LinkState.CLOSED, LinkState.FAILED):
            raise AlreadyClosed(f"{self.kind} on {self._topic} is closed")

    async def _establish(self, *, reconnecting: bool, deadline: float | None) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._check_open()
            conn: BrokerConnection | None = None
            try:
                timeout = self._client.operation_timeout
                if deadline is not None:
                    timeout = max(0.001, min(timeout, deadline - loop.time()))
                url = self._assigned_url
                self._assigned_url = None
                if url is None:
                    url = await self._client.lookup(self._topic, timeout)
                conn = await self._client.connection_to(url, timeout)
                self._check_open()
                try:
                    await self._register(conn, timeout)
                except (Timeout, asyncio.CancelledError):
                    self._abandon(conn)
                    raise
            except PulsarError as exc:
                if conn is not None:
                    self._detach(conn)
                if is_fatal(exc, reconnecting=reconnecting):
                    raise
                log.info("%s on %s: registration failed (%s), retrying", self.kind, self._topic, exc)
                delay = self._backoff.next()
                if deadline is not None and loop.time() + delay >= deadline:
                    if isinstance(exc, Timeout):
                        raise
                    raise Timeout(f"creating {self.kind} on {self._topic} timed out; last error: {exc}") from exc
                await asyncio.sleep(delay)
                continue
            if self.state is not LinkState.CONNECTING or conn.closed.done():
                # Closed while registering, or the connection died right after.
                self._abandon(conn)
                if conn.closed.done() and self.state is LinkState.CONNECTING:
                    continue
                self._check_open()
            self.conn = conn
            self.state = LinkState.READY
            self.registrations += 1
            self._backoff.reset()
            self._on_link_up()
            self._ready.set()
            return

    def _abandon(self, conn: BrokerConnection) -> None:
        """Give up a registration that may have reached the broker (its
        answer timed out, the wait was cancelled, or the link closed
        meanwhile): stop routing ``conn``'s frames here and tell the broker to
        drop it, without waiting for the answer. Left there, it would hold
        the producer's name (or an exclusive subscription) for as long as
        the connection lives, refusing this link's next registration."""
        self._detach(conn)
        if conn.is_open:
            conn.send_command(self._unregister_command())

    async def _create(self) -> None:
        """First registration, bounded by the client's operation timeout."""
        loop = asyncio.get_running_loop()
        try:
            await self._establish(reconnecting=False, deadline=loop.time() + self._client.operation_timeout)
        except BaseException:
            self.state = LinkState.CLOSED
            raise

    # -- losing the link --------------------------------------------------------
    def connection_lost(self, conn: BrokerConnection) -> None:
        self._link_lost(conn, None)

    def on_closed_by_broker(self, conn: BrokerConnection, assigned_url: str | None) -> None:
        self._link_lost(conn, assigned_url)

    def _link_lost(self, conn: BrokerConnection, assigned_url: str | None) -> None:
        if conn is not self.conn or self.state is not LinkState.READY:
            return
        log.info("%s on %s: lost its registration on %s", self.kind, self._topic, conn.url)
        self._detach(conn)
        self.conn = None
        self.state = LinkState.CONNECTING
        self._ready.clear()
        self._assigned_url = assigned_url
        self._on_link_down()
        self._reconnector = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        try:
            await self._establish(reconnecting=True, deadline=None)
        except AlreadyClosed:
            pass
        except PulsarError as exc:
            if self.state is LinkState.CONNECTING:
                log.warning("%s on %s: giving up: %s", self.kind, self._topic, exc)
                self._fail(exc)

    def _fail(self, exc: PulsarError) -> None:
        self.state = LinkState.FAILED
        self._failure = exc
        self._ready.set()  # wake waiters: they find the failure
        if self.conn is not None:
            self._detach(self.conn)
            self.conn = None
        self._on_fatal(exc)

    def _stop_reconnecting(self) -> None:
        self._ready.set()  # wake waiters: they find the link closed
        task, self._reconnector = self._reconnector, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
