"""Who may produce on a topic: producer admission under Pulsar's access
modes, the topic epoch, fencing, WaitForExclusive waiters, and the exclusive
slot a topic keeps for its holder while both move to another broker.

A mixin of :class:`.topic.Topic` (it uses the topic's ``producers``,
``waiting``, ``exclusive_producer``, ``reserved_for``, ``topic_epoch``,
``ledger``, ``_appending`` and ``_admission`` lock): the rules live here, the append path
that enforces them per entry in ``topic.py``. Failure modes are those of
:meth:`ProducerAdmission.add_producer`.
"""
from __future__ import annotations

import asyncio
import logging
import time

from magnetar.broker.errors import BrokerError, PersistenceError, ProducerBusy, ProducerFenced, ServiceNotReady
from magnetar.broker.policies import backlog_quota

from .producer import AccessMode, Producer

log = logging.getLogger(__name__)

#: Managed ledger property: the topic epoch of its exclusive producers.
TOPIC_EPOCH = "topic_epoch"
#: Managed ledger property set by release(): the name of the exclusive
#: producer that held the topic when it left for another broker (PIP-307).
EXCLUSIVE_IN_TRANSIT = "exclusive_in_transit"
#: How long an exclusive producer's admission waits for the sends of the
#: producers before it to be stored (:meth:`ProducerAdmission._earlier_sends_settled`).
EARLIER_SENDS_WAIT_S = 30.0
#: How long a topic that arrived by a move keeps its exclusive slot for that
#: producer, which is being sent here at the same moment as everyone else.
TRANSIT_RESERVATION_S = 10.0


class ProducerAdmission:
    """Producer admission and exclusive access (mixed into ``Topic``)."""
    async def add_producer(self, producer: Producer, requested_epoch: int | None) -> asyncio.Future | None:
        """Admit ``producer`` under its access mode.

        Returns None when the producer is ready now, or a future that completes
        when a WaitForExclusive producer is promoted (it fails with
        ProducerFenced if a fencing producer evicts it while waiting).
        Raises ProducerBusy / ProducerFenced when refused, BacklogQuotaHold /
        BacklogQuotaRefusal while the backlog is over a quota that blocks
        producers (measured now). The topic epoch is persisted before this
        returns for every exclusive admission.
        """
        async with self._admission:
            self._check_open()
            self._check_not_terminated()
            blocking = await backlog_quota.check(self)
            if blocking is not None:
                raise backlog_quota.refusal(self, blocking)
            if producer.name in self.producers:
                raise ProducerBusy(f"producer with name '{producer.name}' is already connected to {self.name}")
            if self.max_producers and not producer.replicator and \
                    sum(not p.replicator for p in self.producers.values()) >= self.max_producers:
                raise ProducerBusy(f"Topic reached max producers limit ({self.max_producers}) on {self.name}")
            mode = producer.access_mode
            returning = self.reserved_for is not None and producer.name == self.reserved_for
            if returning or (self.reserved_for is not None and mode == AccessMode.ExclusiveWithFencing):
                # The holder is back (it keeps its epoch below, ahead of the
                # waiters it had before the move), or a fencing producer takes
                # the topic from it as it would have on the old owner.
                await self._end_reservation_now()
            if mode == AccessMode.Shared and producer.replicator:
                # Geo-replication's producer brings what was written in
                # another region: it writes beside whoever holds the topic
                # here, and does not count as a producer for the access
                # modes. Counted, it kept WaitForExclusive producers waiting
                # as long as it stayed connected (and was refused while an
                # exclusive producer held the topic: Pulsar's issue #24914).
                self._attach(producer)
                return None
            if mode == AccessMode.Shared:
                if self.reserved_for is not None:
                    raise ProducerBusy(f"topic {self.name} has an exclusive producer ({self.reserved_for}) "
                                       f"moving here with the topic")
                if self.exclusive_producer is not None:
                    raise ProducerBusy(f"topic {self.name} has an exclusive producer ({self.exclusive_producer.name})")
                if self.waiting:
                    raise ProducerBusy(f"topic {self.name} has producers waiting for exclusive access")
                self._attach(producer)
                return None
            self._check_epoch(requested_epoch)
            if mode == AccessMode.ExclusiveWithFencing and not returning:
                # (A holder coming back after a move is not a takeover: the
                # waiters it had before the move stay queued behind it.)
                self._fence_all(f"fenced by exclusive producer {producer.name}")
            elif self._has_local_producers() or self.exclusive_producer is not None or self.reserved_for is not None:
                if mode == AccessMode.Exclusive:
                    # Pulsar answers an Exclusive producer that cannot have the
                    # topic with ProducerFenced (ProducerBusy is for Shared).
                    raise ProducerFenced(
                        f"topic {self.name} has a producer; exclusive access refused"
                    )
                waiter = asyncio.get_running_loop().create_future()
                self.waiting.append((producer, waiter))
                producer.requested_epoch = requested_epoch  # type: ignore[attr-defined]
                return waiter
            elif self.waiting and mode == AccessMode.Exclusive and not returning:
                raise ProducerFenced(f"topic {self.name} has producers waiting for exclusive access")
            await self._take_exclusive(producer, requested_epoch)
            return None

    def _has_local_producers(self) -> bool:
        """Whether a producer other than geo-replication's is attached."""
        return any(not p.replicator for p in self.producers.values())

    def _check_epoch(self, requested: int | None) -> None:
        if requested is not None and requested < self.topic_epoch:
            raise ProducerFenced(
                f"topic epoch has moved on: current {self.topic_epoch}, producer's {requested}"
            )

    async def _take_exclusive(self, producer: Producer, requested: int | None) -> None:
        # A producer reconnecting with the current epoch keeps it; anyone else
        # starts a new epoch, persisted before the client hears of it.
        epoch = requested if requested is not None and requested >= self.topic_epoch else self.topic_epoch + 1
        self.exclusive_producer = producer  # reserve the slot before the await
        try:
            await self._earlier_sends_settled()
            if epoch != self.topic_epoch:
                await self.ledger.set_properties({TOPIC_EPOCH: str(epoch)})
        except BaseException:  # a cancelled admission too: the slot must not stay reserved
            if self.exclusive_producer is producer:
                self.exclusive_producer = None
            raise
        self.topic_epoch = epoch
        producer.epoch = epoch
        if producer.fenced:
            # Detached (its connection closed, remove_producer ran) while the
            # epoch was written: attaching it now would hand the topic to a
            # producer no client serves, and keep every other exclusive
            # producer out until the topic unloads. The epoch stays spent.
            if self.exclusive_producer is producer:
                self.exclusive_producer = None
            raise ProducerFenced(f"producer {producer.name} left while it was being admitted")
        self._attach(producer)

    async def _earlier_sends_settled(self) -> None:
        """Return once every send appended so far is stored or failed.

        An exclusive producer is granted only then. A leader bootstraps by
        reading the log to its end (GetLastMessageId, then a reader): a send
        of the producer before it (a crashed leader's, in flight when its
        connection dropped) stored after that read would be missed by the
        new leader's state, and land among its own writes. Appends settle in
        order, so the last one settled means all have. Raises
        ``ServiceNotReady`` (the client retries) if storage has not answered
        in ``EARLIER_SENDS_WAIT_S``."""
        appending = self._appending
        if not appending:
            return
        done = asyncio.get_running_loop().create_future()
        appending[-1].follow(lambda _send: done.done() or done.set_result(None))
        try:
            await asyncio.wait_for(done, EARLIER_SENDS_WAIT_S)
        except TimeoutError:
            raise ServiceNotReady(f"{self.name}: the sends of the producer before are still being stored; "
                                  f"retry") from None

    def _detach_exclusive(self, producer: Producer) -> None:
        """Undo :meth:`_take_exclusive` for a producer whose client is gone."""
        producer.fenced = True
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        if self.exclusive_producer is producer:
            self.exclusive_producer = None

    def _attach(self, producer: Producer) -> None:
        producer.connected_since = time.time()
        self.producers[producer.name] = producer

    def _fence_all(self, reason: str) -> None:
        for other in list(self.producers.values()):
            if other.replicator:
                continue  # not a rival: see add_producer
            other.fenced = True
            self.producers.pop(other.name, None)
            self.service.notify_producer_closed(other)
        self.exclusive_producer = None
        while self.waiting:
            waiter, fut = self.waiting.popleft()
            waiter.fenced = True
            if not fut.done():
                fut.set_exception(ProducerFenced(reason))

    def _end_reservation(self) -> None:
        """The holder did not come back in time: the topic is free for its waiters."""
        if self.reserved_for is None or self.closed:
            return
        log.info("%s: exclusive producer %s did not come back after the move", self.name, self.reserved_for)
        self._clear_reservation()
        asyncio.get_running_loop().create_task(self._forget_reservation())
        if not self._has_local_producers() and self.waiting:
            asyncio.get_running_loop().create_task(self._promote_next())

    async def _end_reservation_now(self) -> None:
        self._clear_reservation()
        await self._forget_reservation()

    def _clear_reservation(self) -> None:
        self.reserved_for = None
        if self._reservation_timer is not None:
            self._reservation_timer.cancel()
            self._reservation_timer = None

    async def _forget_reservation(self) -> None:
        # So that a later load (a restart, not a move) does not wait for it.
        try:
            await self.ledger.set_properties({EXCLUSIVE_IN_TRANSIT: None})
        except Exception as exc:  # a closed ledger: the next release writes it anew
            log.info("%s: cannot clear %s: %s", self.name, EXCLUSIVE_IN_TRANSIT, exc)

    def close_producer(self, producer: Producer) -> None:
        """Detach ``producer`` and tell its client (CLOSE_PRODUCER): it reconnects."""
        self.remove_producer(producer)
        self.service.notify_producer_closed(producer)

    def remove_producer(self, producer: Producer) -> None:
        """Detach (close or lost connection); frees exclusive access for the next waiter."""
        producer.fenced = True
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        for i, (waiter, fut) in enumerate(self.waiting):
            if waiter is producer:
                del self.waiting[i]
                if not fut.done():
                    fut.cancel()
                break
        if self.exclusive_producer is producer:
            self.exclusive_producer = None
        if not self._has_local_producers() and self.waiting:
            asyncio.get_running_loop().create_task(self._promote_next())

    async def _promote_next(self) -> None:
        async with self._admission:
            while self.waiting and not self._has_local_producers() and self.exclusive_producer is None \
                    and self.reserved_for is None:
                producer, fut = self.waiting.popleft()
                if fut.done():
                    continue
                requested = getattr(producer, "requested_epoch", None)
                try:
                    # A holder that reconnected and queued (its epoch was
                    # current then) is fenced if another producer held the
                    # topic meanwhile, as it would be had it arrived now:
                    # its pending sends must not land after that one's.
                    self._check_epoch(requested)
                    await self._take_exclusive(producer, requested)
                except BrokerError as exc:
                    _settle(fut, exc)
                    continue
                except Exception as exc:
                    _settle(fut, PersistenceError(f"cannot persist topic epoch: {exc}"))
                    continue
                if fut.done():
                    # Nobody awaits the turn any more (the PRODUCER request's
                    # task was cancelled while the epoch was written): the
                    # producer must not keep the topic from the next waiter.
                    self._detach_exclusive(producer)
                    continue
                fut.set_result(None)
                return


def _settle(fut: asyncio.Future, exc: BaseException) -> None:
    """Fail a waiter's turn, unless nobody awaits it any more."""
    if not fut.done():
        fut.set_exception(exc)
