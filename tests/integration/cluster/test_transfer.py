"""Moving a bundle between brokers without lookups (PIP-307), with traffic."""
from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.request

import pulsar
import pytest

from magnetar import client as mclient
from magnetar.broker.cluster.bundles import bundle_of

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
TOPIC = "persistent://public/default/moving"
BUNDLE = bundle_of(TOPIC, "public/default").range



def attached_at(cluster: LocalCluster, broker_id: str) -> bool:
    """The producer and the consumer are attached at ``broker_id`` (its topic stats)."""
    member = next(m for m in cluster.members if m.broker_id == broker_id)
    try:
        stats = cluster.admin(member, "/admin/v2/persistent/public/default/moving/stats")
    except Exception:  # noqa: BLE001  (not loaded there yet)
        return False
    subs = stats.get("subscriptions", {})
    return bool(stats.get("publishers")) and bool(subs.get("exclusive", {}).get("consumers"))


def owner(cluster: LocalCluster) -> str:
    return cluster.owners()[BUNDLE]


@pytest.fixture(params=["file", "object"])
def cluster(tmp_path, request):
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=5.0, storage=request.param).start()
    yield c
    c.stop()


def test_a_bundle_moves_back_and_forth_under_traffic_without_lookups_or_loss(cluster):
    b0 = cluster.members[0]
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    client = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
    sent: list[int] = []
    received: list[int] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    try:
        consumer = client.subscribe(TOPIC, "exclusive", consumer_type=pulsar.ConsumerType.Exclusive)
        producer = client.create_producer(TOPIC, producer_name="p-moving", batching_enabled=False,
                                          send_timeout_millis=30_000)

        produced = threading.Event()  # the producer has returned: ``sent`` is final

        def produce():
            try:
                i = 0
                while not stop.is_set():
                    try:
                        producer.send(str(i).encode())
                        sent.append(i)
                        i += 1
                    except Exception as exc:  # noqa: BLE001  (the test asserts there is none)
                        errors.append(exc)
                        return
            finally:
                produced.set()

        def consume():
            while True:
                try:
                    msg = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    # Not on ``stop`` alone: a send still in flight then is appended after.
                    if produced.is_set() and len(received) >= len(sent):
                        return
                    continue
                received.append(int(msg.data()))
                consumer.acknowledge(msg)

        threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
        for t in threads:
            t.start()
        wait_for(lambda: len(received) >= 50, 30, what="traffic flowing")
        before = cluster.lookups()
        first = owner(cluster)
        other = next(m.broker_id for m in cluster.members if m.broker_id != first)
        for k in range(10):
            target = other if k % 2 == 0 else first
            cluster.admin(b0, f"/admin/v2/namespaces/public/default/{BUNDLE}/unload?destinationBroker={target}",
                          "PUT")
            assert owner(cluster) == target
            wait_for(lambda t=target: attached_at(cluster, t), 30, what=f"both clients at the new owner ({k})")
        # One more move through the CLI.
        done = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--url", b0.admin_url, "namespaces",
                               "unload", "public/default", "--bundle", BUNDLE, "--destination", other],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert owner(cluster) == other
        after = cluster.lookups()
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert sorted(set(received)) == sent, "a message was lost"
        # Without PIP-307 every move makes both clients look the topic up: with
        # it they are sent to the new owner.
        print(f"{after - before} lookups during 11 moves; "
              f"{len(received) - len(set(received))} redeliveries after moves")
        assert after == before, f"{after - before} lookups during 11 moves"
    finally:
        stop.set()
        client.close()


# Files only, for the suite's time (about 100 s on object storage). Its
# object-storage failure (repeats and lookups after moves) was a new owner
# opening the sealed ledger while the old owner compacted it: proved and
# kept fixed by tests/integration/object_storage/test_compaction_race.py.
@pytest.mark.parametrize("cluster", ["file"], indirect=True)
def test_twenty_moves_with_two_producers_and_every_subscription_type(cluster):
    """20 moves back and forth while two deduplicated producers send and
    consumers of every subscription type (official client and Magnetar's)
    receive: nothing lost anywhere, no error, no lookup after the first.
    Magnetar's Exclusive and Failover consumers get each message exactly
    once; the official client's may get again the messages whose grouped acks
    it dropped in a reconnect (docs/cluster.md): counted, and bounded."""
    b0 = cluster.members[0]
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    official = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
    ours = mclient.Client(b0.service_url, operation_timeout_seconds=30)
    stop = threading.Event()  # producers stop
    drained = threading.Event()  # consumers stop (once everything arrived, or the test gave up)
    errors: list[BaseException] = []
    sent: dict[str, list[str]] = {"p-a": [], "p-b": []}
    received: dict[str, list[str]] = {}
    threads: list[threading.Thread] = []
    try:
        consumers = {
            "exclusive": [official.subscribe(TOPIC, "exclusive", consumer_type=pulsar.ConsumerType.Exclusive)],
            "failover": [official.subscribe(TOPIC, "failover", consumer_type=pulsar.ConsumerType.Failover)
                         for _ in range(2)],
            "shared": [official.subscribe(TOPIC, "shared", consumer_type=pulsar.ConsumerType.Shared)
                       for _ in range(2)],
            "key_shared": [official.subscribe(TOPIC, "key_shared", consumer_type=pulsar.ConsumerType.KeyShared)
                           for _ in range(2)],
            "ours-exclusive": [ours.subscribe(TOPIC, "ours-exclusive", consumer_type=mclient.ConsumerType.Exclusive)],
            "ours-failover": [ours.subscribe(TOPIC, "ours-failover", consumer_type=mclient.ConsumerType.Failover)
                              for _ in range(2)],
        }
        producers = {name: official.create_producer(TOPIC, producer_name=name, batching_enabled=False,
                                                    send_timeout_millis=30_000, initial_sequence_id=1)
                     for name in sent}

        def produce(name: str) -> None:
            i = 0
            while not stop.is_set():
                value = f"{name}:{i}"
                try:
                    producers[name].send(value.encode(), partition_key=f"k{i % 7}")
                except Exception as exc:  # noqa: BLE001  (the test asserts there is none)
                    errors.append(exc)
                    return
                sent[name].append(value)
                i += 1

        def consume(sub: str, consumer) -> None:
            timeout = mclient.Timeout if sub.startswith("ours") else pulsar.Timeout
            while True:
                try:
                    msg = consumer.receive(timeout_millis=300)
                except timeout:
                    if drained.is_set():
                        return
                    continue
                except Exception as exc:  # noqa: BLE001
                    errors.append(exc)
                    return
                received.setdefault(sub, []).append(msg.data().decode())
                consumer.acknowledge(msg)

        threads = [threading.Thread(target=produce, args=(n,)) for n in sent]
        threads += [threading.Thread(target=consume, args=(sub, c)) for sub, cs in consumers.items() for c in cs]
        for t in threads:
            t.start()
        wait_for(lambda: all(len(received.get(s, ())) >= 20 for s in consumers), 30, what="traffic everywhere")
        before = cluster.lookups()
        first = owner(cluster)
        other = next(m.broker_id for m in cluster.members if m.broker_id != first)
        for k in range(20):
            target = other if k % 2 == 0 else first
            cluster.admin(b0, f"/admin/v2/namespaces/public/default/{BUNDLE}/unload?destinationBroker={target}",
                          "PUT")
            assert owner(cluster) == target
            # Traffic resumes at the new owner before the next move. Counted
            # from here: the old owner had released the topic before the move
            # returned, so these sends are the new owner's (counted from before
            # the move, a loaded machine let the old owner take them all, and
            # the next move began before the clients reached the new owner).
            mark = {n: len(v) for n, v in sent.items()}
            wait_for(lambda m=mark: all(len(sent[n]) >= m[n] + 10 for n in sent) or errors, 30,
                     what=f"both producers sending after move {k}")
            assert not errors, errors
        moved_lookups = cluster.lookups() - before
        stop.set()
        for t in threads[:2]:
            t.join(60)
        everything = sorted(sent["p-a"] + sent["p-b"])
        try:
            wait_for(lambda: all(set(received.get(s, ())) >= set(everything) for s in consumers), 60,
                     what="every subscription to receive everything")
        except AssertionError:
            missing = {s: sorted(set(everything) - set(received.get(s, ())))[:10] for s in consumers}
            o = next(m for m in cluster.members if m.broker_id == owner(cluster))
            subs = cluster.admin(o, "/admin/v2/persistent/public/default/moving/stats")["subscriptions"]
            raise AssertionError(f"missing after 60 s (first 10 each): {missing}; errors: {errors}; "
                                 f"subscriptions at the owner: {subs}") from None
        drained.set()
        for t in threads[2:]:
            t.join(60)
        assert not errors, errors
        repeats = {}
        for sub in consumers:
            got = received[sub]
            assert sorted(set(got)) == everything, f"{sub}: a message was lost or invented"
            repeats[sub] = len(got) - len(set(got))
        print(f"{len(everything)} messages, 20 moves, {moved_lookups} lookups; received again: {repeats}")
        assert repeats["ours-exclusive"] == 0 and repeats["ours-failover"] == 0, repeats
        # The official client's repeats come from acks it grouped and dropped
        # in the reconnect; holding the first dispatch after a move
        # (load_balancer_transfer_dispatch_hold_ms) lets the rest arrive first.
        # Without the hold they were about two thirds of the messages.
        assert repeats["exclusive"] + repeats["failover"] <= 0.2 * len(everything), repeats
        assert moved_lookups == 0, f"{moved_lookups} lookups during 20 moves"
    finally:
        stop.set()
        drained.set()
        for t in threads:
            t.join(10)
        official.close()
        ours.close()


def _prepared(member) -> int:
    """Topics ``member`` loaded for bundles moving to it before it took them."""
    text = urllib.request.urlopen(member.admin_url + "/metrics", timeout=10).read().decode()
    found = re.search(r"^magnetar_bundle_topics_prepared_total\{[^}]*\} (\S+)$", text, re.M)
    return int(float(found.group(1))) if found else 0


@pytest.mark.parametrize("cluster", ["object"], indirect=True)
def test_the_new_owner_opens_the_moving_topic_before_the_clients_arrive(cluster):
    """The destination loads the topic while the bundle is still Assigning to
    it (the source named it in the record), so the producer handed over finds
    its ledger open; the offset it continues from is the source's, taken
    from the source's word where the entry it names is the last one."""
    b0 = cluster.members[0]
    client = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(TOPIC, producer_name="p-prepared", batching_enabled=False)
        for i in range(5):
            producer.send(str(i).encode())
        first = owner(cluster)
        source = next(m for m in cluster.members if m.broker_id == first)
        target = next(m for m in cluster.members if m.broker_id != first)
        offset = cluster.admin(source, "/admin/v2/persistent/public/default/moving/internalStats")["nextOffset"]
        assert offset == 5
        before = (_prepared(target), cluster.lookups())

        cluster.admin(b0, f"/admin/v2/namespaces/public/default/{BUNDLE}/unload?destinationBroker={target.broker_id}",
                      "PUT")
        assert owner(cluster) == target.broker_id
        producer.send(b"after the move")

        assert _prepared(target) == before[0] + 1
        assert cluster.admin(target, "/admin/v2/persistent/public/default/moving/internalStats")["nextOffset"] == offset + 1
        assert cluster.lookups() == before[1]
    finally:
        client.close()
