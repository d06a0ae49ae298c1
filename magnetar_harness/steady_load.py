"""Steady traffic of the official client across a cluster, for stops and restarts.

:class:`SteadyLoad` runs, per topic, one deduplicated producer (a fixed
producer name, synchronous sends in a thread of its own, each send timed)
and one Failover consumer, all through a multi-host service URL, as
operators' clients are set up. It counts send errors, keeps every
acknowledged (sent) and every received value, and the worst send latency.

:meth:`SteadyLoad.stop` stops the producers, then waits until every sent
value has arrived (or ``timeout``), and closes the client.
"""
from __future__ import annotations

import logging
import re
import threading
import time
import urllib.request
from dataclasses import dataclass, field

import pulsar


@dataclass
class LoadResult:
    sent: int = 0
    received_distinct: int = 0
    #: Sent (acknowledged by the broker) and never received.
    lost: int = 0
    errors: list = field(default_factory=list)
    worst_send_ms: float = 0.0
    #: Sends slower than 250 ms.
    slow_sends: int = 0


class SteadyLoad:
    def __init__(self, service_url: str, topics: list[str], *, pause_s: float = 0.005,
                 send_timeout_ms: int = 30_000) -> None:
        quiet = logging.getLogger("steady-load-client")
        quiet.setLevel(logging.WARNING)  # the client's INFO lines would drown a failure
        self.client = pulsar.Client(service_url, operation_timeout_seconds=30, logger=quiet)
        self.topics = topics
        self.pause_s = pause_s
        self.sent: dict[str, list[int]] = {t: [] for t in topics}
        self.received: dict[str, set[int]] = {t: set() for t in topics}
        self.errors: list[BaseException] = []
        self.latencies_ms: list[float] = []
        #: (monotonic start, ms) of every send that succeeded.
        self.timed_sends: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._stop_consumers = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.consumers = [self.client.subscribe(t, "steady", consumer_type=pulsar.ConsumerType.Failover)
                          for t in topics]
        self.producers = [self.client.create_producer(t, producer_name=f"steady-{k}", batching_enabled=False,
                                                      send_timeout_millis=send_timeout_ms)
                          for k, t in enumerate(topics)]

    def start(self) -> "SteadyLoad":
        for topic, producer in zip(self.topics, self.producers):
            self._threads.append(threading.Thread(target=self._produce, args=(topic, producer), daemon=True))
        for topic, consumer in zip(self.topics, self.consumers):
            self._threads.append(threading.Thread(target=self._consume, args=(topic, consumer), daemon=True))
        for t in self._threads:
            t.start()
        return self

    def _produce(self, topic: str, producer) -> None:
        i = 0
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                producer.send(str(i).encode())
            except Exception as exc:  # noqa: BLE001  (counted: the tests assert there is none)
                with self._lock:
                    self.errors.append(exc)
                return
            with self._lock:
                self.latencies_ms.append((time.monotonic() - started) * 1000)
                self.timed_sends.append((started, self.latencies_ms[-1]))
            self.sent[topic].append(i)
            i += 1
            time.sleep(self.pause_s)

    def _consume(self, topic: str, consumer) -> None:
        while not self._stop_consumers.is_set():
            try:
                msg = consumer.receive(timeout_millis=200)
            except pulsar.Timeout:
                continue
            except Exception:  # noqa: BLE001  (closing)
                return
            self.received[topic].add(int(msg.data()))
            try:
                consumer.acknowledge(msg)
            except Exception:  # noqa: BLE001
                pass

    def worst_send_ms(self, since: float, until: float = float("inf")) -> float:
        """The slowest send that began between ``since`` and ``until`` (monotonic)."""
        with self._lock:
            return max((ms for t, ms in self.timed_sends if since <= t <= until), default=0.0)

    def messages_sent(self) -> int:
        return sum(len(v) for v in self.sent.values())

    def messages_received(self) -> int:
        return sum(len(v) for v in self.received.values())

    def stop(self, timeout: float = 60.0) -> LoadResult:
        self._stop.set()
        producers = self._threads[:len(self.topics)]
        for t in producers:
            t.join(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(not set(self.sent[t]) <= self.received[t] for t in self.topics):
            time.sleep(0.1)
        self._stop_consumers.set()
        for t in self._threads[len(self.topics):]:
            t.join(5)
        result = LoadResult(sent=self.messages_sent(), received_distinct=self.messages_received(),
                            errors=list(self.errors))
        result.lost = sum(len(set(self.sent[t]) - self.received[t]) for t in self.topics)
        result.worst_send_ms = max(self.latencies_ms, default=0.0)
        result.slow_sends = sum(1 for x in self.latencies_ms if x > 250)
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass
        return result


def lookups_of(admin_url: str) -> int | None:
    """Lookups a broker answered (its pulsar_broker_lookup_answers_total); None once it does not answer."""
    try:
        text = urllib.request.urlopen(admin_url + "/metrics", timeout=5).read().decode()
    except OSError:
        return None
    found = re.search(r"^pulsar_broker_lookup_answers_total (\S+)$", text, re.M)
    return int(float(found.group(1))) if found else 0


class LookupWatch:
    """Lookups answered by a broker about to stop: read every 50 ms until it
    stops answering, so those it answered while stopping count too."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = admin_url
        self.last = lookups_of(admin_url) or 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            value = lookups_of(self.admin_url)
            if value is None:
                return
            self.last = value
            time.sleep(0.05)

    def final(self, timeout: float = 60.0) -> int:
        self._thread.join(timeout)
        return self.last
