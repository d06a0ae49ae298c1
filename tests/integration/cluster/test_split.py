"""Splitting bundles on a real cluster: by the admin CLI under traffic, and by the leader."""
from __future__ import annotations

import subprocess
import sys
import threading

import pulsar
import pytest

from magnetar.broker.cluster.bundles import bundle_of

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
NS = "public/default"


def topics_in(rng: str, count: int, prefix: str) -> list[str]:
    """``count`` topic names that fall in bundle ``rng`` of the default layout."""
    found, i = [], 0
    while len(found) < count:
        name = f"persistent://{NS}/{prefix}-{i}"
        if bundle_of(name, NS).range == rng:
            found.append(name)
        i += 1
    return found


def cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--url", cluster.members[0].admin_url,
                           *args], capture_output=True, text=True, timeout=90)


def test_a_bundle_split_under_traffic_keeps_every_client_and_message(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=5.0).start()
    rng = "0x40000000_0x80000000"
    topics = topics_in(rng, 6, "split")
    sent: dict[str, list[int]] = {t: [] for t in topics}
    received: dict[str, list[int]] = {t: [] for t in topics}
    errors: list[BaseException] = []
    stop = threading.Event()
    produced = threading.Event()  # the producer has returned: ``sent`` is final
    client = pulsar.Client(cluster.members[1].service_url, operation_timeout_seconds=30)
    try:
        producers = {t: client.create_producer(t, batching_enabled=False, send_timeout_millis=30_000) for t in topics}
        consumers = {t: client.subscribe(t, "s", consumer_type=pulsar.ConsumerType.Failover) for t in topics}
        owner = cluster.owners()[rng]

        def produce() -> None:
            try:
                i = 0
                while not stop.is_set():
                    for t, p in producers.items():
                        try:
                            p.send(str(i).encode())
                            sent[t].append(i)
                        except Exception as exc:  # noqa: BLE001  (asserted below: there must be none)
                            errors.append(exc)
                            return
                    i += 1
            finally:
                produced.set()

        def consume(t: str) -> None:
            c = consumers[t]
            # Distinct values: a redelivered duplicate must not end the loop
            # before the last message sent has arrived. Only once the producer
            # has returned: after ``stop`` it still ends its round of topics.
            while not (produced.is_set() and len(set(received[t])) >= len(sent[t])):
                try:
                    msg = c.receive(timeout_millis=300)
                except pulsar.Timeout:
                    continue
                received[t].append(int(msg.data()))
                c.acknowledge(msg)

        threads = [threading.Thread(target=produce)] + [threading.Thread(target=consume, args=(t,)) for t in topics]
        for th in threads:
            th.start()
        wait_for(lambda: all(len(r) >= 20 for r in received.values()), 30, what="traffic on every topic")
        before = cluster.lookups()

        done = cli(cluster, "namespaces", "split-bundle", NS, "--bundle", rng)
        assert done.returncode == 0, done.stdout + done.stderr
        layout = cluster.admin(cluster.members[2], f"/admin/v2/namespaces/{NS}/bundles")
        halves = [r for r in layout["states"] if r.startswith("0x40000000_") or r.endswith("_0x80000000")]
        assert layout["numBundles"] == 5 and rng not in layout["states"], layout
        assert len(halves) == 2 and all(layout["owners"][h] == owner for h in halves), layout

        # The same through a topic's name, with the topic-count algorithm.
        done = cli(cluster, "namespaces", "split-bundle", NS, "--topic", topics[0],
                   "--split-algorithm-name", "topic_count_equally_divide")
        assert done.returncode == 0, done.stdout + done.stderr
        assert cluster.admin(cluster.members[0], f"/admin/v2/namespaces/{NS}/bundles")["numBundles"] == 6

        # A half moves on like any bundle.
        other = next(m.broker_id for m in cluster.members if m.broker_id != owner)
        moved = cli(cluster, "namespaces", "unload", NS, "--topic", topics[-1], "--destination", other)
        assert moved.returncode == 0, moved.stdout + moved.stderr
        marks = {t: len(sent[t]) for t in topics}
        try:
            wait_for(lambda: all(len(received[t]) >= marks[t] + 20 for t in topics), 60,
                     what="traffic on every topic after the splits and the move")
        except AssertionError:
            raise AssertionError(f"errors {errors}; sent/received "
                                 f"{[(len(sent[t]), len(received[t])) for t in topics]}\n{cluster.logs()}") from None
        stop.set()
        for th in threads:
            th.join(60)
        assert not errors, errors
        for t in topics:
            assert sorted(set(received[t])) == sent[t], f"{t}: a message was lost"
        # The split itself makes no client look anything up; the PIP-307 move neither.
        assert cluster.lookups() == before
    finally:
        stop.set()
        client.close()
        cluster.stop()


def test_bad_split_requests_get_clear_errors(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, session_ttl=5.0).start()
    try:
        unknown = cli(cluster, "namespaces", "split-bundle", NS, "--bundle", "0x00000000_0x00000010")
        assert unknown.returncode == 1 and "404" in unknown.stderr and "no bundle" in unknown.stderr
        malformed = cli(cluster, "namespaces", "split-bundle", NS, "--bundle", "nonsense")
        assert malformed.returncode == 1 and "412" in malformed.stderr
        algorithm = cli(cluster, "namespaces", "split-bundle", NS, "--bundle", "0x00000000_0x40000000",
                        "--split-algorithm-name", "magic")
        assert algorithm.returncode == 1 and "unknown splitAlgorithmName" in algorithm.stderr
        unowned = cli(cluster, "namespaces", "split-bundle", NS, "--bundle", "0x00000000_0x40000000")
        assert unowned.returncode == 1 and "not owned" in unowned.stderr
        both = cli(cluster, "namespaces", "split-bundle", NS)
        assert both.returncode == 2 and "exactly one of --bundle and --topic" in both.stderr
    finally:
        cluster.stop()


AUTO_SPLIT = """
load_balancer_report_interval_s = 0.5
load_balancer_enabled = false
load_balancer_namespace_bundle_max_topics = 3
load_balancer_namespace_maximum_bundles = 8
"""


def test_the_leader_splits_bundles_with_too_many_topics_until_the_maximum(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=5.0, broker_config=AUTO_SPLIT).start()
    client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
    try:
        topics = topics_in("0x00000000_0x40000000", 12, "crowd")
        producers = [client.create_producer(t) for t in topics]
        for p in producers:
            p.send(b"x")

        def split_enough():
            layout = cluster.admin(cluster.members[0], f"/admin/v2/namespaces/{NS}/bundles")
            return layout if layout["numBundles"] >= 6 else None

        layout = wait_for(split_enough, 60, what="the leader splitting the crowded bundle")
        print("layout after automatic splits:", layout["boundaries"])
        # Never beyond the configured maximum, and every producer still works.
        def crowd_states() -> set:
            states = cluster.admin(cluster.members[1], f"/admin/v2/namespaces/{NS}/bundles")["states"]
            return {s for r, s in states.items() if int(r.split("_")[0], 16) < 0x40000000}

        # Halves without a topic may be Init (nobody placed one there yet).
        wait_for(lambda: crowd_states() <= {"Owned", "Init"}, 30, what="every half owned or free")
        for p in producers:
            p.send(b"y")
        assert cluster.admin(cluster.members[2], f"/admin/v2/namespaces/{NS}/bundles")["numBundles"] <= 8
    finally:
        client.close()
        cluster.stop()
