"""The clients of a chaos run, each a thread that records what it does.

Every send is an ``invoke`` then ``ok`` (the broker's receipt), ``fail`` (a
refusal that means "not stored": an expected-offset mismatch, a fenced
producer's send) or ``info`` (anything else: a timeout, a dropped
connection; the outcome is unknown). Values are ``<process>:<seq>``.

- :class:`DedupProducer`: the official client, a named producer, the
  namespace's deduplication on: promised once, in order.
- :class:`IdempotentProducer`: Magnetar's client with ``idempotent=True``:
  promised once, in order.
- :class:`ExclusiveWriter`: the official client with ExclusiveWithFencing
  (or WaitForExclusive: a leader election), two or more competing: each
  session (one acquisition) must be one segment of the log.
- :class:`ConditionalWriter`: Magnetar's client with expected offsets: what
  it is told was stored is at the offset it asked for; what is refused is
  not stored.
- :class:`OffsetProbe`: Magnetar's client asking every topic in turn for
  its next offset: a read, which must count every receipt given before it
  was asked (no stale reads).

Consumers and readers are in :mod:`.consumers`.

The official ``pulsar-client`` is imported when a workload that needs it
starts (``make test`` installs it).
"""
from __future__ import annotations

import abc
import logging
import random
import threading
import time
from typing import Any

from magnetar import client as magnetar_client

from .history import History

#: How long a send may wait before the client gives up (an ``info``).
SEND_TIMEOUT_MS = 10_000


def _quiet_logger() -> logging.Logger:
    # The official client logs every refused reconnect at ERROR: under a
    # nemesis that is thousands of lines saying what the history records.
    logger = logging.getLogger("magnetar_chaos.pulsar-client")
    logger.setLevel(logging.CRITICAL)
    return logger


def official_client() -> Any:
    try:
        import pulsar
    except ImportError:  # pragma: no cover (installed with the test extra)
        raise RuntimeError("the official pulsar-client is needed: pip install 'magnetar[test]' (make test)") from None
    return pulsar


class Workload(threading.Thread, metaclass=abc.ABCMeta):
    """A client thread; :meth:`stop` asks it to finish its current send and end."""

    promise = "once"
    #: Fields every ``invoke`` of its sends carries (the regions topology
    #: names the region of a producer that writes elsewhere than region A).
    labels: dict[str, Any] = {}

    def __init__(self, name: str, service_url: str, topic: str, history: History, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.process = name
        self.service_url = service_url
        self.topic = topic
        self.history = history
        self.rng = random.Random(seed)
        self.seq = 0
        self.acks = 0
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported by the runner: a workload must not die silently
            self.error = exc

    @abc.abstractmethod
    def work(self) -> None:
        """The workload itself; returns when :attr:`stopping` (or the client is done)."""

    # -- recording ---------------------------------------------------------------------------
    def invoke(self, **extra: Any) -> str:
        value = f"{self.process}:{self.seq}"
        self.history.add(self.process, "invoke", "send", topic=self.topic, value=value, seq=self.seq,
                         promise=self.promise, **self.labels, **extra)
        self.seq += 1
        return value

    def ok(self, value: str, offset: int | None = None) -> None:
        self.acks += 1
        self.history.add(self.process, "ok", "send", topic=self.topic, value=value, offset=offset)

    def fail(self, value: str, error: BaseException) -> None:
        self.history.add(self.process, "fail", "send", topic=self.topic, value=value, error=type(error).__name__)

    def info(self, value: str, error: BaseException) -> None:
        self.history.add(self.process, "info", "send", topic=self.topic, value=value, error=type(error).__name__)

    def retrying(self, make, what: str):
        """``make()`` until it works or the run stops (the broker may be down)."""
        delay = 0.2
        while not self.stopping:
            try:
                return make()
            except Exception:
                time.sleep(delay)  # the broker is down or paused: try again (a client's backoff)
                delay = min(delay * 2, 2.0)
        return None


class DedupProducer(Workload):
    def work(self) -> None:
        pulsar = official_client()
        client = pulsar.Client(self.service_url, operation_timeout_seconds=15, logger=_quiet_logger())
        try:
            producer = self.retrying(lambda: client.create_producer(
                self.topic, producer_name=self.process, batching_enabled=False,
                send_timeout_millis=SEND_TIMEOUT_MS, initial_sequence_id=1), "producer")  # see ExclusiveWriter
            while producer is not None and not self.stopping:
                value = self.invoke()
                try:
                    producer.send(value.encode())
                    self.ok(value)
                except Exception as exc:
                    self.info(value, exc)
        finally:
            client.close()


class IdempotentProducer(Workload):
    def work(self) -> None:
        client = magnetar_client.Client(self.service_url, operation_timeout_seconds=15)
        try:
            producer = self.retrying(lambda: client.create_producer(
                self.topic, idempotent=True, send_timeout_millis=SEND_TIMEOUT_MS), "producer")
            while producer is not None and not self.stopping:
                value = self.invoke()
                try:
                    mid = producer.send(value.encode())
                    self.ok(value, mid.offset)
                except magnetar_client.AlreadyClosed:
                    self.info(value, RuntimeError("closed"))
                    return
                except Exception as exc:
                    self.info(value, exc)
        finally:
            client.close()


class ExclusiveWriter(Workload):
    """Takes the topic with ExclusiveWithFencing, writes a few messages, lets
    go, and again; a rival doing the same fences it now and then. With
    ``access_mode="WaitForExclusive"`` it is a leader election instead: the
    rival waits for the leader to let go (or to lose its connection)."""

    def __init__(self, *args, access_mode: str = "ExclusiveWithFencing", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.access_mode = access_mode

    def work(self) -> None:
        pulsar = official_client()
        client = pulsar.Client(self.service_url, operation_timeout_seconds=15, logger=_quiet_logger())
        sessions = 0
        try:
            while not self.stopping:
                session = f"{self.process}.{sessions}"
                sessions += 1
                try:
                    # initial_sequence_id: the official C++ client otherwise resets its
                    # sequence counter to the broker's last sequence id when it
                    # reconnects before its first receipt, numbering its next
                    # message like the one it resends; with deduplication on, that
                    # message is acknowledged as a duplicate and never stored (a
                    # client bug, docs/pulsar-differences.md). Each session's
                    # producer has a fresh broker-given name: any start will do, and
                    # not 0, which the Python wrapper takes for "unset".
                    producer = client.create_producer(
                        self.topic, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS,
                        access_mode=getattr(pulsar.ProducerAccessMode, self.access_mode), initial_sequence_id=1)
                except Exception:
                    time.sleep(0.2 + self.rng.random() * 0.3)  # the broker is down, or a rival holds it
                    continue
                for _ in range(self.rng.randint(5, 30)):
                    if self.stopping:
                        break
                    value = self.invoke(exclusive=True, session=session)
                    try:
                        producer.send(value.encode())
                        self.ok(value)
                    except pulsar.ProducerFenced as exc:
                        self.fail(value, exc)
                        break
                    except Exception as exc:
                        self.info(value, exc)
                        break
                try:
                    producer.close()
                except Exception:
                    pass
                time.sleep(self.rng.random() * 0.5)  # let the rival in
        finally:
            client.close()


class ConditionalWriter(Workload):
    def work(self) -> None:
        client = magnetar_client.Client(self.service_url, operation_timeout_seconds=15)
        try:
            producer = self.retrying(lambda: client.create_producer(
                self.topic, send_timeout_millis=SEND_TIMEOUT_MS), "producer")
            expected = self.retrying(lambda: client.get_next_offset(self.topic), "offset")
            while producer is not None and expected is not None and not self.stopping:
                value = self.invoke(expected_offset=expected)
                try:
                    mid = producer.send(value.encode(), expected_offset=expected)
                    self.ok(value, mid.offset)
                    expected += 1
                except magnetar_client.ExpectedOffsetMismatch as exc:
                    self.fail(value, exc)
                    expected = exc.next_offset if exc.next_offset is not None else expected
                except magnetar_client.AlreadyClosed as exc:
                    self.info(value, exc)
                    return
                except Exception as exc:
                    self.info(value, exc)
                    # Whether it was stored is unknown: ask where the topic is now.
                    expected = self.retrying(lambda: client.get_next_offset(self.topic), "offset")
        finally:
            client.close()


class OffsetProbe(Workload):
    """Asks each of ``topics`` in turn for its next offset
    (``get_next_offset``, which a conditional writer relies on), recording
    ``next-offset`` invoke/ok/info ops; the checker wants every answer to
    count each send acknowledged before it was asked. It sends nothing (its
    :attr:`seq` stays 0: the run's progress line counts sends)."""

    #: Between two reads: a few hundred a second would crowd the history, not add to the check.
    PACE_S = 0.02

    def __init__(self, name: str, service_url: str, topics: list[str], history: History, seed: int) -> None:
        super().__init__(name, service_url, topics[0], history, seed)
        self.topics = topics

    def work(self) -> None:
        client = magnetar_client.Client(self.service_url, operation_timeout_seconds=15)
        try:
            turn = 0
            while not self.stopping:
                topic = self.topics[turn % len(self.topics)]
                turn += 1
                self.history.add(self.process, "invoke", "next-offset", topic=topic)
                try:
                    answer = client.get_next_offset(topic)
                except Exception as exc:  # the broker is away or the topic moving: no answer, no check
                    self.history.add(self.process, "info", "next-offset", topic=topic, error=type(exc).__name__)
                    continue
                self.history.add(self.process, "ok", "next-offset", topic=topic, next_offset=answer)
                time.sleep(self.PACE_S)
        finally:
            client.close()


def read_log(service_url: str, topic: str, timeout_s: float = 60.0, positions: bool = False) -> list[list]:
    """The topic as stored: ``[[offset, value], ...]`` from the earliest entry;
    with ``positions``, ``[[offset, value, "ledger:entry"], ...]``."""
    client = magnetar_client.Client(service_url, operation_timeout_seconds=30)
    deadline = time.monotonic() + timeout_s
    try:
        reader = client.create_reader(topic, magnetar_client.MessageId.earliest)
        log = []
        while reader.has_message_available():
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took more than {timeout_s:.0f} s")
            msg = reader.read_next(10_000)
            log.append([msg.offset, msg.data().decode(errors="replace")])
            if positions:
                mid = msg.message_id()
                log[-1].append(f"{mid.ledger_id()}:{mid.entry_id()}")
        return log
    finally:
        client.close()
