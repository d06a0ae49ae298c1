"""Sending one consumer's acknowledgements: grouped, confirmed, sent again
when they may have been lost.

The consumer hands :class:`AckSender` whole-entry acks. They wait for the
next group flush (every ``ack_group_time``; at once when that is 0 or 1000
are waiting), go out one ACK command per kind, each with a request id, and
stay unconfirmed until the broker answers (:class:`.acks.UnconfirmedAcks`).
A group the broker refused, or whose answer the link lost, goes again (an
ack applied twice is a no-op): a topic handed over to another broker closes
its cursors first, and an ack that reached the old owner after that was not
applied.

Failure modes: none raised. A broker that never answers leaves its groups
unconfirmed until the link goes down (:meth:`link_lost`), which puts them
back; :meth:`flush_confirmed` waits for answers at most its ``timeout``.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import Callable

from magnetar.protocol import Type, command, pb

from .acks import AckGroup, PendingAcks, UnconfirmedAcks
from .connection import BrokerConnection
from .message_id import MessageId

log = logging.getLogger(__name__)

#: Waiting acks that trigger a flush before the group's time is up.
FLUSH_AT = 1000


class AckSender:
    """``ready_connection`` gives the consumer's connection while its
    registration is up, else None (acks wait for the next one)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, consumer_id: int, group_time: float,
                 new_request_id: Callable[[], int], ready_connection: Callable[[], BrokerConnection | None],
                 name: str) -> None:
        self._loop = loop
        self._consumer_id = consumer_id
        self._group_time = group_time
        self._new_request_id = new_request_id
        self._ready_connection = ready_connection
        self._name = name
        self._pending = PendingAcks()
        self._unconfirmed = UnconfirmedAcks()
        self._answers: set[asyncio.Future] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def __len__(self) -> int:
        """Acks waiting for a flush (not those sent and unconfirmed)."""
        return len(self._pending)

    @property
    def unconfirmed(self) -> int:
        return len(self._unconfirmed)

    def add(self, entry: MessageId) -> None:
        self._pending.add(entry)
        self._schedule()

    def add_cumulative(self, entry: MessageId) -> None:
        self._pending.add_cumulative(entry)
        self._schedule()

    def flush(self) -> None:
        """Send what waits now (nothing while the link is down)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        conn = self._ready_connection()
        if not len(self._pending) or conn is None:
            return
        for group, cmd in self._commands():
            request_id = cmd.ack.request_id
            self._unconfirmed.sent(request_id, group)
            # No time-out of its own: an answer that never comes is a link
            # that goes down, and that puts the group back.
            answer = conn.request_future(cmd, None)
            self._answers.add(answer)
            answer.add_done_callback(functools.partial(self._on_answer, request_id))

    async def flush_confirmed(self, timeout: float) -> None:
        """Send what waits, then wait until every ack sent has its answer (at
        most ``timeout`` s), so none is overtaken by a close or a seek."""
        self.flush()
        if self._answers:
            await asyncio.wait(list(self._answers), timeout=timeout)

    def link_lost(self) -> None:
        """The registration is gone: what it did not confirm may not have been
        applied, and goes first thing on the next one (the consumer flushes
        before its FLOW, so the broker applies it before dispatching)."""
        for group in self._unconfirmed.take_all():
            self._pending.restore(group)

    def drop_unconfirmed(self) -> None:
        """A seek decides the position: what is unconfirmed now is not sent
        again (it could acknowledge what the seek rewound to)."""
        self._unconfirmed.take_all()

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # -- inside ------------------------------------------------------------------------
    def _schedule(self, delay: float | None = None) -> None:
        if delay is None and (self._group_time <= 0 or len(self._pending) >= FLUSH_AT):
            self.flush()
        elif self._timer is None and not self._closed:
            self._timer = self._loop.call_later(delay or self._group_time, self.flush)

    def _on_answer(self, request_id: int, answer: asyncio.Future) -> None:
        self._answers.discard(answer)
        error = answer.exception() if not answer.cancelled() else asyncio.CancelledError()
        group = self._unconfirmed.answered(request_id)
        if error is None or group is None:
            return  # applied, or already put back when the link went down
        if self._closed:
            log.info("consumer %s: acks not confirmed at close: %s", self._name, error)
            return
        log.info("consumer %s: acks not applied (%s); sending them again", self._name, error)
        self._pending.restore(group)
        # Not at once: a broker refusing them now will usually close us first.
        self._schedule(delay=max(self._group_time, 0.1))

    def _commands(self) -> list[tuple[AckGroup, pb.BaseCommand]]:
        individual, cumulative = self._pending.take()
        cmds = []
        if individual:
            cmds.append((AckGroup(individual, None), command(
                Type.ACK, consumer_id=self._consumer_id, ack_type=pb.CommandAck.Individual,
                message_id=[m.to_proto(with_batch=False) for m in individual], request_id=self._new_request_id())))
        if cumulative is not None:
            cmds.append((AckGroup([], cumulative), command(
                Type.ACK, consumer_id=self._consumer_id, ack_type=pb.CommandAck.Cumulative,
                message_id=[cumulative.to_proto(with_batch=False)], request_id=self._new_request_id())))
        return cmds
