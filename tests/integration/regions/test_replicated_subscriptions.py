"""Replicated subscriptions (PIP-33) end to end with the official client: a
consumer acknowledges in one region, fails over to another with the same
subscription name, and resumes where it left off there."""
from __future__ import annotations

import threading
import time

import pulsar
import pytest

from magnetar import client as magnetar_client
from tests.conftest import wait_for

from .regions_process import LocalRegions, replicated_namespace

pytestmark = pytest.mark.timeout(600)
TOTAL = 10_000
ACKED = 5_000
RATE = 2_000  # msg/s: "a second of traffic"


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


class _MarkDeleteWatcher(threading.Thread):
    """Polls a region's copy of a subscription until ``until``; ``moved_at``
    is when its mark-delete position last changed (an update arrived)."""

    def __init__(self, region, path: str, sub: str, until: float) -> None:
        super().__init__(daemon=True)
        self.region, self.path, self.sub, self.until = region, path, sub, until
        self.moved_at = float("nan")

    def run(self) -> None:
        last = None
        while time.monotonic() < self.until:
            try:
                cursor = self.region.admin(f"{self.path}/internalStats")["cursors"].get(self.sub)
            except Exception:
                cursor = None
            position = cursor and cursor["markDeletePosition"]
            if position != last:
                last, self.moved_at = position, time.monotonic()
            time.sleep(0.02)  # a sampling period, not a wait for a condition


def _watch_mark_delete(region, path: str, sub: str, until: float) -> _MarkDeleteWatcher:
    watcher = _MarkDeleteWatcher(region, path, sub, until)
    watcher.start()
    return watcher


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
    try:
        consumer = client_a.subscribe(topic, "billing", replicate_subscription_state_enabled=True,
                                      initial_position=pulsar.InitialPosition.Earliest)
        producer = client_a.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        errors: list = []
        publisher = threading.Thread(target=_publish_paced, args=(producer, errors))
        publisher.start()
        for i in range(ACKED):
            msg = consumer.receive(10_000)
            assert msg.data() == f"m{i}".encode()  # in order, and no marker ever reaches the client
            consumer.acknowledge(msg)
        consumer.close()
        acked_at = time.monotonic()
        last_move = {name: _watch_mark_delete(region, path, "billing", acked_at + 5)
                     for name, region in ((b.name, b), (c.name, c))}
        assert a.admin(f"{path}/stats")["subscriptions"]["billing"]["isReplicated"] is True
        publisher.join(60)
        assert not errors, errors

        # Each other region's copy of the subscription is created and moved by update markers.
        for region in (b, c):
            wait_for(lambda: (_backlog(region, path, "billing") or 10**9) <= TOTAL - ACKED + 2 * RATE, 30,
                     what=f"the subscription moved in {region.name}")
        reached = {}
        for name, watcher in last_move.items():
            watcher.join(30)
            reached[name] = watcher.moved_at - acked_at
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
        # ...and sees again at most about a second of traffic.
        seen_again = ACKED - got[0]
        assert seen_again <= 1.5 * RATE, f"{seen_again} acknowledged messages delivered again"
        print(f"\nfailover at {RATE} msg/s: {max(0, seen_again)} messages seen again; the update reached "
              + ", ".join(f"{name} within {s:.2f} s" for name, s in reached.items()))
    finally:
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
