"""Idempotent producers, client side: the leased producer id and its sequence numbers.

An idempotent producer writes under an identity the broker leased to it
(LEASE_PID): a producer id (pid), a generation, and a sequence number per
message. Every entry's MessageMetadata carries ``magnetar_pid``,
``magnetar_generation`` and ``magnetar_sequence`` (the sequence of the
entry's first message; a batch of n messages takes n numbers). The broker
appends an entry only if its first sequence is exactly one past the last one
it stored for the pid, answers a resend of a stored entry with the original
receipt, and refuses an older generation (ProducerFenced). So the client's
rules are:

- numbers are handed out contiguously, in send order, when an entry is sealed;
- an entry that may have been stored keeps its number for ever: resends after
  a reconnect or a timeout reuse it (never renumber what may be stored);
- only an entry the broker *refused* (nothing stored) gives its number back,
  and the entries behind it are renumbered down (see
  :meth:`AsyncProducer._refuse`); their copies already on the wire are then
  refused as sequence gaps, which the producer expects and ignores.

Leases: ``pid=-1`` asks for a new pid (sequence 0, a fresh generation); a
known pid with its generation renews; a known pid without a generation is a
takeover (generation + 1, fencing every older holder; the sequence continues
from what the broker stored). The broker persists a lease before answering,
so a lease survives broker restarts; a pid unused for the broker's expiry
period and out of lease is forgotten (NotAllowedError on use).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from magnetar.protocol import ServerError, Type, command, pb

from .backoff import Backoff
from .errors import NotAllowedError, ProducerFenced, PulsarError, from_server_error

if TYPE_CHECKING:
    from .connection import BrokerConnection

log = logging.getLogger(__name__)

#: Producer metadata (PRODUCER command) that makes the broker read the pid fields.
IDEMPOTENT_METADATA = ("magnetar.idempotent", "true")

#: Lease errors after which the identity is gone for good.
_IDENTITY_LOST = (ProducerFenced, NotAllowedError)


@dataclass(frozen=True, slots=True)
class PidLease:
    """What the broker granted. ``next_sequence``: the first sequence number
    the broker has not stored for this pid."""

    pid: int
    generation: int
    next_sequence: int
    expire_ms: int


async def lease_pid(conn: "BrokerConnection", request_id: int, topic: str, *, pid: int = -1,
                    generation: int | None = None, lease_ms: int = 60_000,
                    timeout: float | None = None) -> PidLease:
    """Ask the broker on ``conn`` for a lease on ``topic``.

    ``pid=-1``: a new pid. ``pid`` and ``generation``: renew. ``pid`` alone:
    take over (generation + 1). Raises ProducerFenced (renewing a generation
    that was taken over), NotAllowedError (unknown or expired pid),
    ServiceUnitNotReady, Timeout, ConnectError.
    """
    cmd = command(Type.LEASE_PID, request_id=request_id, topic=topic, pid=pid, expire_ms=lease_ms,
                  generation=generation)
    reply = (await conn.request(cmd, timeout)).leasePidResponse
    if not reply.leases:
        raise from_server_error(ServerError.UnknownError, "LEASE_PID_RESPONSE without a lease")
    lease = reply.leases[0]
    if lease.HasField("error"):
        raise from_server_error(lease.error, lease.message)
    return PidLease(lease.pid, lease.generation, lease.sequence_number, lease.expire_ms)


class Identity:
    """The pid, generation and next sequence number of one idempotent producer."""

    __slots__ = ("pid", "generation", "next_sequence")

    def __init__(self, lease: PidLease) -> None:
        self.pid = lease.pid
        self.generation = lease.generation
        self.next_sequence = lease.next_sequence

    def take(self, n: int) -> tuple[int, int, int]:
        """Reserve ``n`` contiguous numbers for one entry of ``n`` messages;
        return its (pid, generation, first sequence) metadata fields."""
        first = self.next_sequence
        self.next_sequence += n
        return (self.pid, self.generation, first)


def restamp(metadata: bytes, first_sequence: int) -> bytes:
    """``metadata`` (serialized) with another first sequence number."""
    meta = pb.MessageMetadata.FromString(metadata)
    meta.magnetar_sequence = first_sequence
    return meta.SerializeToString()


class LeaseRenewer:
    """Renews a producer's lease every half lease period, in the background.

    ``renew()`` performs one renewal (it raises what :func:`lease_pid`
    raises). A renewal that fails with ProducerFenced or NotAllowedError
    ends the producer through ``on_lost``; other failures (connection down,
    broker busy) are retried with backoff, well before the lease runs out.
    """

    def __init__(self, renew: Callable[[], Awaitable[PidLease]], lease_ms: int,
                 on_lost: Callable[[PulsarError], None]) -> None:
        self._renew = renew
        self._interval = max(lease_ms / 2000, 0.05)
        self._on_lost = on_lost
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def _run(self) -> None:
        backoff = Backoff(min(0.1, self._interval), self._interval)
        delay = self._interval
        while True:
            await asyncio.sleep(delay)
            try:
                await self._renew()
            except _IDENTITY_LOST as exc:
                log.warning("producer id lease lost: %s", exc)
                self._task = None
                self._on_lost(exc)
                return
            except PulsarError as exc:
                # Not connected right now, or the broker is busy: try again
                # soon; the lease has another half period to go.
                log.info("lease renewal failed (%s); retrying", exc)
                delay = backoff.next()
                continue
            backoff.reset()
            delay = self._interval
