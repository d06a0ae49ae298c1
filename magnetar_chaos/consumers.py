"""The readers of a chaos run: consumers of each subscription type and a
reader, each a thread recording every message it gets as a ``receive`` op
(with its subscription, or ``reader``, and its redelivery count).

- :class:`SubscriptionConsumer`: the official client on one subscription of
  a type (Shared, Failover, Key_Shared), acknowledging what it receives.
  Every acknowledged send of the topic must reach the subscription (at
  least once). On the ordered types (Failover, Key_Shared with one key) the
  messages of each producer must *first* arrive in the order they were
  sent: a redelivery repeats, it never jumps ahead.
- :class:`TopicReader`: the official client's reader from the earliest
  message: what it reads, repeats aside, must be the stored log from its
  start, in order, with no gap (it resumes after its last message on every
  reconnect).

After :meth:`~.workloads.Workload.stop` each one drains until the topic is
quiet, so the checker can ask whether everything stored reached it; the
runner stops them only once every writer has finished its last send.
"""
from __future__ import annotations

import abc
import time
from typing import Callable

from .workloads import Workload, _quiet_logger, official_client


class Receiver(Workload):
    promise = "at-least-once"
    #: Draining after stop: done once nothing came for this long *while
    #: connected* with every acknowledged send of its topic received (a
    #: client still in its reconnect backoff is not "quiet"), or after
    #: DRAIN_MAX_S in all (the runner waits 30 s for its threads).
    QUIET_S = 3.0
    DRAIN_MAX_S = 25.0
    #: What the checker expects of the delivery order (see the module docstring):
    #: None, "per-producer" (first receipts in each producer's order) or "log"
    #: (first receipts are the log from its start, with no gap).
    order: str | None = None
    #: The name the ``receive`` ops carry (a subscription, or "reader").
    subscription = ""
    #: Messages received (``acks`` counts acknowledged sends, which readers make none of).
    received = 0

    @abc.abstractmethod
    def _open(self, pulsar, client):
        """The consumer or reader, on the official ``client``."""

    def _done_with(self, consumer, msg) -> None:
        """After recording ``msg``: acknowledge it (consumers) or nothing (readers)."""

    def _next(self, consumer):
        return consumer.receive(500)

    #: Whether everything this receiver should get has reached where it
    #: reads (its drain counts quiet time only while it has): always, where
    #: every writer of the topic writes; the regions topology sets it where
    #: writes also come in by replication.
    caught_up: Callable[[], bool] = staticmethod(lambda: True)

    def _caught_up(self) -> bool:
        return self.caught_up()

    def _got_acknowledged(self) -> bool:
        """Whether every send of its topic the history has as acknowledged
        has come (the drain counts quiet time only then, up to DRAIN_MAX_S).
        A reader of the hosts topology (seed 728) left 3 s after its last
        message with one acknowledged message unread, its topic loaded
        again elsewhere seconds before the end: "missed by consumers"
        should say a message never came, not that it came late."""
        ops = self.history.ops
        new = ops[self._scanned:]
        self._scanned += len(new)
        self._acknowledged.update(op.get("value") for op in new
                                  if op.get("f") == "send" and op.get("type") == "ok" and op.get("topic") == self.topic)
        return self._acknowledged <= self._got

    def _opened(self, service_url: str) -> None:
        """Called on the receiver's thread each time it is connected anew."""

    def _labels(self) -> dict:
        """Extra fields of its ``receive`` ops."""
        return {}

    def _connect(self, pulsar, old_client):
        """Close ``old_client`` (if any) and open the consumer at
        :attr:`service_url`, retrying while the broker is away; ``(client,
        consumer or None if the run stopped first, the URL)``."""
        if old_client is not None:
            try:
                old_client.close()
            except Exception:
                pass  # the broker is away: the client goes anyway
        url = self.service_url
        client = pulsar.Client(url, operation_timeout_seconds=15, logger=_quiet_logger())
        consumer = self.retrying(lambda: self._open(pulsar, client), "consumer")
        if consumer is not None:
            self._opened(url)
        return client, consumer, url

    def work(self) -> None:
        pulsar = official_client()
        self._got: set[str] = set()
        self._acknowledged: set[str] = set()
        self._scanned = 0
        client, consumer, url = self._connect(pulsar, None)
        try:
            quiet_since = drain_until = None
            while consumer is not None:
                if self.service_url != url:  # told to read elsewhere: a failover
                    client, consumer, url = self._connect(pulsar, client)
                    quiet_since = None
                    continue
                try:
                    msg = self._next(consumer)
                except Exception:  # a timeout, or the broker is away: keep asking
                    if self.stopping:
                        now = time.monotonic()
                        drain_until = drain_until or now + self.DRAIN_MAX_S
                        if not _connected(consumer) or not self._caught_up() or not self._got_acknowledged():
                            quiet_since = None
                        else:
                            quiet_since = quiet_since or now
                        if (quiet_since is not None and now - quiet_since > self.QUIET_S) or now > drain_until:
                            return
                    continue
                quiet_since = None
                value = msg.data().decode(errors="replace")
                self._got.add(value)
                self.history.add(self.process, "ok", "receive", topic=self.topic,
                                 value=value, redelivery=msg.redelivery_count(),
                                 subscription=self.subscription, order=self.order, **self._labels())
                self.received += 1
                try:
                    self._done_with(consumer, msg)
                except Exception:
                    pass  # unacknowledged: it comes again, which the checker counts
        finally:
            client.close()


def _connected(consumer) -> bool:
    try:
        return bool(consumer.is_connected())
    except Exception:
        return True  # a client without is_connected: the quiet time alone decides


class SubscriptionConsumer(Receiver):
    """One consumer on subscription ``chaos-<type>`` of the topic."""

    def __init__(self, *args, consumer_type: str = "Shared", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.consumer_type = consumer_type
        self.subscription = f"chaos-{consumer_type.lower()}"
        self.order = "per-producer" if consumer_type in ("Failover", "KeyShared") else None

    def _open(self, pulsar, client):
        return client.subscribe(self.topic, self.subscription,
                                consumer_type=getattr(pulsar.ConsumerType, self.consumer_type),
                                initial_position=pulsar.InitialPosition.Earliest)

    def _done_with(self, consumer, msg) -> None:
        consumer.acknowledge(msg)


class SharedConsumer(SubscriptionConsumer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, consumer_type="Shared", **kwargs)


class TopicReader(Receiver):
    """A reader from the earliest message; judged as a gap-free prefix of the log."""

    subscription = "reader"
    order = "log"

    def _open(self, pulsar, client):
        return client.create_reader(self.topic, pulsar.MessageId.earliest)

    def _next(self, reader):
        return reader.read_next(500)
