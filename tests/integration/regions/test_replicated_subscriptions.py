"""Replicated subscriptions (PIP-33) end to end with the official client: a
consumer acknowledges in one region, fails over to another with the same
subscription name, and resumes where it left off there."""
from __future__ import annotations

import os
import signal
import statistics
import threading
import time

import pulsar
import pytest

from magnetar import client as magnetar_client
from tests.helpers import wait_for

from magnetar_harness.regions import LocalRegions, replicated_namespace

pytestmark = pytest.mark.timeout(600)
TOTAL = 10_000
ACKED = 5_000
RATE = 2_000  # msg/s: "a second of traffic"
#: Seconds of traffic a failover may repeat: the 1 s snapshot interval, plus
#: the snapshot's round between the regions and the client's 100 ms ack grouping.
REPEAT_BOUND_S = 1.25


@pytest.fixture
def regions(tmp_path):
    r = LocalRegions(tmp_path / "geo", regions=3).start()
    yield r
    r.stop()


def _backlog(region, path: str, sub: str) -> int | None:
    try:
        subs = region.admin(f"{path}/stats")["subscriptions"]
    except Exception:  # not loaded there yet
        return None
    return subs[sub]["msgBacklog"] if sub in subs else None


class _CounterWatcher(threading.Thread):
    """Samples one counter of a region's ``replicatedSubscriptions`` topic
    stats until ``stop`` is set; ``reached[v]`` is when it first showed
    ``v`` (or more)."""

    def __init__(self, region, path: str, counter: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.region, self.path, self.counter, self.stop = region, path, counter, stop
        self.reached: dict[int, float] = {}

    def run(self) -> None:
        seen = 0
        while not self.stop.is_set():
            try:
                value = self.region.admin(f"{self.path}/stats").get("replicatedSubscriptions", {}).get(self.counter, 0)
            except Exception:  # not loaded there yet
                value = 0
            now = time.monotonic()
            for v in range(seen + 1, value + 1):
                self.reached[v] = now
            seen = max(seen, value)
            time.sleep(0.01)  # a sampling period, not a wait for a condition


def _update_delays(sent: _CounterWatcher, applied: _CounterWatcher) -> list[float]:
    """For each update the source wrote that the remote applied: how long
    after it was written (to the sampling period) the remote had moved."""
    return [applied.reached[v] - at for v, at in sorted(sent.reached.items()) if v in applied.reached]


def _publish_paced(producer, errors: list) -> None:
    try:
        start = time.monotonic()
        for i in range(TOTAL):
            producer.send_async(f"m{i}".encode(), None)
            if i % 100 == 99:  # keep to RATE: snapshots are about time, so is the bound below
                ahead = start + (i + 1) / RATE - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush()
    except BaseException as exc:
        errors.append(exc)


def test_a_consumer_that_fails_over_resumes_within_a_second_of_traffic(regions):
    replicated_namespace(regions, "acme/payments")
    a, b, c = regions.regions
    topic = "persistent://acme/payments/tx"
    path = "/admin/v2/persistent/acme/payments/tx"
    client_a, client_b = pulsar.Client(a.service_url), pulsar.Client(b.service_url)
    stop_watching = threading.Event()
    try:
        consumer = client_a.subscribe(topic, "billing", replicate_subscription_state_enabled=True,
                                      initial_position=pulsar.InitialPosition.Earliest)
        # Every update a writes, and when b and c have applied it.
        sent = _CounterWatcher(a, path, "updatesSent", stop_watching)
        applied = {r.name: _CounterWatcher(r, path, "updatesApplied", stop_watching) for r in (b, c)}
        for watcher in (sent, *applied.values()):
            watcher.start()
        producer = client_a.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        errors: list = []
        publisher = threading.Thread(target=_publish_paced, args=(producer, errors))
        publisher.start()
        for i in range(ACKED):
            msg = consumer.receive(10_000)
            assert msg.data() == f"m{i}".encode()  # in order, and no marker ever reaches the client
            consumer.acknowledge(msg)
        consumer.close()
        assert a.admin(f"{path}/stats")["subscriptions"]["billing"]["isReplicated"] is True
        publisher.join(60)
        assert not errors, errors

        # Each other region's copy of the subscription is created and moved by update markers.
        for region in (b, c):
            wait_for(lambda: (_backlog(region, path, "billing") or 10**9) <= TOTAL - ACKED + 2 * RATE, 30,
                     what=f"the subscription moved in {region.name}")
        wait_for(lambda: all(max(w.reached, default=0) >= max(sent.reached, default=1) for w in applied.values()),
                 30, what="b and c applied every update a wrote")
        stop_watching.set()
        delays = {name: _update_delays(sent, w) for name, w in applied.items()}
        assert all(delays.values()), delays
        wait_for(lambda: b.admin(f"{path}/internalStats")["nextOffset"] >= TOTAL, 60, what="b has everything")

        # The consumer fails over to b: it gets everything it had not acknowledged...
        failed_over = client_b.subscribe(topic, "billing", replicate_subscription_state_enabled=True)
        got = []
        while len(got) < TOTAL:
            try:
                got.append(int(failed_over.receive(5000).data().decode()[1:]))
            except pulsar.Timeout:
                break
        assert got and got[-1] == TOTAL - 1 and got == list(range(got[0], TOTAL)), (got[:3], got[-3:])
        # ...and sees again at most the last second of traffic: a snapshot every
        # second, plus its round between the regions and the client's grouped acks.
        seen_again = ACKED - got[0]
        assert seen_again <= REPEAT_BOUND_S * RATE, f"{seen_again} acknowledged messages delivered again"
        print(f"\nfailover at {RATE} msg/s: {max(0, seen_again)} messages seen again "
              f"({max(0, seen_again) / RATE:.2f} s of traffic); {len(sent.reached)} updates, applied "
              + ", ".join(f"in {name} after p50 {statistics.median(d) * 1000:.0f} ms, max {max(d) * 1000:.0f} ms"
                          for name, d in delays.items()))
    finally:
        stop_watching.set()
        client_a.close()
        client_b.close()


def test_markers_never_reach_a_client_and_readers_at_the_end_do_not_hang(regions):
    replicated_namespace(regions, "acme/ledger")
    a = regions.regions[0]
    topic = "persistent://acme/ledger/log"
    path = "/admin/v2/persistent/acme/ledger/log"
    client = pulsar.Client(a.service_url)
    ours = magnetar_client.Client(a.service_url)
    try:
        consumer = client.subscribe(topic, "s", replicate_subscription_state_enabled=True)
        ours_consumer = ours.subscribe(topic, "ours", replicate_subscription_state_enabled=True)
        producer = client.create_producer(topic)
        for i in range(20):
            producer.send(f"m{i}".encode())
            consumer.acknowledge(consumer.receive(10_000))
        # Markers follow the data (snapshot requests, responses, snapshots, updates):
        # the last entries of the topic are markers now.
        wait_for(lambda: a.admin(f"{path}/internalStats")["nextOffset"] > 25, 30, what="markers written")
        with pytest.raises(pulsar.Timeout):
            consumer.receive(2000)  # the official client does not filter markers: the broker never sends them
        ours_got = []
        while True:
            try:
                ours_got.append(ours_consumer.receive(2000).data().decode())
            except magnetar_client.Timeout:
                break
        assert ours_got == [f"m{i}" for i in range(20)]
        for client_kind in (client, ours):
            reader = client_kind.create_reader(topic, pulsar.MessageId.earliest if client_kind is client
                                               else magnetar_client.MessageId.earliest)
            bodies = []
            while reader.has_message_available():
                bodies.append(reader.read_next(5000).data().decode())
            assert bodies == [f"m{i}" for i in range(20)]
        # An idle subscription is stepped over markers: no backlog grows out of them (Pulsar #6437).
        wait_for(lambda: a.admin(f"{path}/stats")["subscriptions"]["s"]["msgBacklog"] == 0, 10,
                 what="no marker backlog")
    finally:
        client.close()
        ours.close()


def test_snapshots_need_every_region_and_do_not_pile_up_while_one_is_silent(regions):
    """A snapshot completes only when every region answered (else a failover
    could skip what the silent region never got), and a region that does not
    answer leaves one request in flight, not one per second (Pulsar #23839's
    request flood)."""
    replicated_namespace(regions, "acme/snap")
    a, _, c = regions.regions
    topic = "persistent://acme/snap/t"
    path = "/admin/v2/persistent/acme/snap/t"
    client = pulsar.Client(a.service_url)
    silent = False

    def controller() -> dict:
        return a.admin(f"{path}/stats")["replicatedSubscriptions"]

    try:
        client.subscribe(topic, "billing", replicate_subscription_state_enabled=True)
        producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)

        def traffic(seconds: float) -> None:  # 100 msg/s: snapshots only follow new data
            start = time.monotonic()
            for i in range(int(100 * seconds)):
                producer.send_async(b"x", None)
                ahead = start + (i + 1) / 100 - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            producer.flush()

        traffic(3)
        wait_for(lambda: controller()["snapshotsCompleted"] >= 2, 30, what="snapshots while every region answers")
        os.kill(c.pid, signal.SIGSTOP)  # c's broker stops answering; its connections stay open
        silent = True
        before = controller()["snapshotsCompleted"]
        traffic(5)  # five snapshot periods with new data
        during = controller()
        # One answered just before the pause may still complete; nothing after it.
        assert during["snapshotsCompleted"] <= before + 1, (before, during)
        assert during["snapshotsInProgress"] <= 1, during
        os.kill(c.pid, signal.SIGCONT)
        silent = False
        traffic(2)
        wait_for(lambda: controller()["snapshotsCompleted"] > during["snapshotsCompleted"], 90,
                 what="snapshots again once c answers")
    finally:
        if silent:
            os.kill(c.pid, signal.SIGCONT)
        client.close()


def test_the_snapshot_frequency_is_a_broker_setting(tmp_path):
    """replicated_subscriptions_snapshot_frequency_ms (Pulsar's
    replicatedSubscriptionsSnapshotFrequencyMillis): at 200 ms, two seconds
    of traffic take several times the snapshots the 1 s default would."""
    regions = LocalRegions(tmp_path / "geo", regions=2,
                           broker_config="replicated_subscriptions_snapshot_frequency_ms = 200\n").start()
    try:
        replicated_namespace(regions, "acme/fast")
        a = regions.regions[0]
        path = "/admin/v2/persistent/acme/fast/t"
        client = pulsar.Client(a.service_url)
        try:
            client.subscribe("persistent://acme/fast/t", "billing", replicate_subscription_state_enabled=True)
            producer = client.create_producer("persistent://acme/fast/t", batching_enabled=False)
            start = time.monotonic()
            for i in range(200):  # 100 msg/s for 2 s
                producer.send_async(b"x", None)
                ahead = start + (i + 1) / 100 - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            producer.flush()
            completed = a.admin(f"{path}/stats")["replicatedSubscriptions"]["snapshotsCompleted"]
            assert completed >= 5, f"{completed} snapshots in 2 s at 200 ms"
        finally:
            client.close()
    finally:
        regions.stop()
