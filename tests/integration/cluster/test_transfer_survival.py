"""What must survive a bundle move without lookups (PIP-307), each with a test.

A move releases a bundle's topics on the source (ledgers closed, clients held)
and loads them again on the destination from the shared storage and the
metadata store. Everything a topic knows must come back there: exclusive
access and its epoch, idempotent producers' pids, generations and sequences,
producer-name sequences, upcoming offsets, cursors with individual acks,
delayed messages, compacted views and schemas. Each test moves its topic's
bundle there and back (at least two moves) on a real 3-broker cluster over a
real etcd, and checks something that would be false had the state been lost.
Two tests force a race instead: a WaitForExclusive producer reaching the
new owner before the exclusive holder does (the destination paused while the
source releases), and the destination killed -9 in the middle of a move.

Each test uses its own topic; all but the kill test share one cluster (the
moves of one test do not touch another's clients), the kill test has its own.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import urllib.error
from datetime import timedelta

import pulsar
import pytest
from pulsar.schema import AvroSchema, Integer, Record, String

from magnetar.broker.cluster.bundles import bundle_of
from magnetar.client import Client as OurClient
from magnetar.client import Result
from magnetar.client import errors as our_errors
from magnetar.protocol import pb

from magnetar_harness.cluster import LocalCluster, Member
from tests.helpers import unique, wait_for

pytestmark = pytest.mark.timeout(300)

NS = "public/default"
Mode = pulsar.ProducerAccessMode


# -- helpers ------------------------------------------------------------------------------
def unique_topic(prefix: str) -> str:
    return f"persistent://{NS}/{unique(prefix)}"


def short(topic: str) -> str:
    return topic.rsplit("/", 1)[1]


def bundle(topic: str) -> str:
    return bundle_of(topic, NS).range


def live(cluster: LocalCluster) -> list[Member]:
    return [m for m in cluster.members if _alive(m.pid)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child stays a zombie until `cluster up` reaps it: not alive either.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def member(cluster: LocalCluster, broker_id: str) -> Member:
    return next(m for m in cluster.members if m.broker_id == broker_id)


def owner(cluster: LocalCluster, topic: str) -> str | None:
    return cluster.owners().get(bundle(topic))


def move(cluster: LocalCluster, topic: str, target: str) -> None:
    """Move ``topic``'s bundle to ``target`` (PIP-307); returns once ``target`` owns it."""
    via = live(cluster)[0]
    cluster.admin(via, f"/admin/v2/namespaces/{NS}/{bundle(topic)}/unload?destinationBroker={target}", "PUT")
    assert owner(cluster, topic) == target


def there_and_back(cluster: LocalCluster, topic: str) -> list[str]:
    """The two destinations of a there-and-back move of ``topic``'s bundle:
    another broker, then the current owner."""
    first = owner(cluster, topic)
    assert first is not None, f"{topic}'s bundle is not owned (no client has used it yet)"
    other = next(m.broker_id for m in live(cluster) if m.broker_id != first)
    return [other, first]


def stats(cluster: LocalCluster, topic: str, internal: bool = False) -> dict | None:
    """The topic's stats from its owner (None while nobody has loaded it)."""
    who = owner(cluster, topic)
    if who is None:
        return None
    kind = "internalStats" if internal else "stats"
    try:
        return cluster.admin(member(cluster, who), f"/admin/v2/persistent/{NS}/{short(topic)}/{kind}")
    except (urllib.error.URLError, ConnectionError):
        return None


def _states(cluster: LocalCluster, via: Member) -> dict:
    return cluster.admin(via, f"/admin/v2/namespaces/{NS}/bundles")["states"]


def read_all(service_url: str, topic: str) -> list:
    """Every message of ``topic`` from the start (the log as stored)."""
    client = pulsar.Client(service_url, operation_timeout_seconds=30)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(10_000))
        return out
    finally:
        client.close()


def sends_through_a_move(cluster: LocalCluster, topic: str, target: str, send_async, label: bytes) -> list[bytes]:
    """Pipeline sends (up to 20 in flight) before, during and after a move of
    ``topic`` to ``target``: those reaching the source while it releases the
    topic are held and resent to the destination. ``send_async(body, i,
    callback)`` sends the i-th; returns the bodies in send order once every
    send succeeded, and asserts some were queued while the bundle moved."""
    sent: list[bytes] = []
    results: list = []
    window = threading.Semaphore(20)
    stop, moving = threading.Event(), threading.Event()
    during = [0]

    def pump() -> None:
        i = 0
        while not stop.is_set():
            if not window.acquire(timeout=0.1):
                continue
            body = label + b"-%d" % i
            sent.append(body)
            during[0] += moving.is_set()
            send_async(body, i, lambda res, _mid: (results.append(res), window.release()))
            i += 1

    pumper = threading.Thread(target=pump, daemon=True)
    pumper.start()
    try:
        wait_for(lambda: len(results) >= 20, 30, what="sends flowing")
        moving.set()
        move(cluster, topic, target)
        moving.clear()
        settled = len(results)
        wait_for(lambda: len(results) >= settled + 20, 30, what="sends settling on the new owner")
    finally:
        stop.set()
        pumper.join(10)
    wait_for(lambda: len(results) == len(sent), 30, what="every pipelined send settled")
    assert during[0] > 0, "no send was queued while the bundle moved"
    assert all(res == Result.Ok for res in results), [r for r in results if r != Result.Ok]
    return sent


@pytest.fixture(scope="module", params=["file", "object"])
def cluster(tmp_path_factory, request):
    # object: a move carries no data, the new owner reads the ledgers' index in etcd
    c = LocalCluster(tmp_path_factory.mktemp("survival") / "cluster", brokers=3, session_ttl=5.0,
                     storage=request.param).start()
    yield c
    c.stop()


# -- 1. exclusive producers -----------------------------------------------------------------
def _publishers(cluster: LocalCluster, topic: str) -> tuple[list[tuple[str, str]], int] | None:
    s = stats(cluster, topic)
    if s is None:
        return None
    return sorted((p["producerName"], p["accessMode"]) for p in s.get("publishers", [])), s.get("waitingPublishers", 0)


@pytest.mark.parametrize("holder_mode", [Mode.Exclusive, Mode.ExclusiveWithFencing], ids=["Exclusive", "Fencing"])
def test_an_exclusive_producer_stays_the_only_writer_and_its_waiter_stays_queued(cluster, holder_mode):
    """Across moves an exclusive producer (Exclusive or ExclusiveWithFencing)
    keeps the topic: its sends succeed, a
    second Exclusive producer is still refused (ProducerFenced) and a Shared one
    too (ProducerBusy), and a WaitForExclusive producer queued before the moves
    is still queued after them; it gets the topic when the holder closes."""
    topic = unique_topic("exclusive")
    url = cluster.members[0].service_url
    holder_client = pulsar.Client(url, operation_timeout_seconds=30)
    waiter_client = pulsar.Client(url, operation_timeout_seconds=30)
    rival_client = pulsar.Client(url, operation_timeout_seconds=30)
    waiter: list = []
    try:
        holder = holder_client.create_producer(topic, producer_name="holder", access_mode=holder_mode,
                                               batching_enabled=False)
        holder.send(b"holder-0")

        def wait_for_exclusive() -> None:
            waiter.append(waiter_client.create_producer(topic, producer_name="waiter",
                                                        access_mode=Mode.WaitForExclusive, batching_enabled=False))

        threading.Thread(target=wait_for_exclusive, daemon=True).start()
        wait_for(lambda: _publishers(cluster, topic) == ([("holder", holder_mode.name)], 1), 20,
                 what="the waiter queued behind the holder")
        for k, target in enumerate(there_and_back(cluster, topic), start=1):
            move(cluster, topic, target)
            # The holder comes back with its epoch; the waiter (its creation
            # failed over with the move) queues again behind it.
            wait_for(lambda: _publishers(cluster, topic) == ([("holder", holder_mode.name)], 1), 30,
                     what=f"the holder back at {target} and the waiter queued (move {k})")
            holder.send(b"holder-%d" % k)
            with pytest.raises(pulsar.ProducerFenced):
                rival_client.create_producer(topic, access_mode=Mode.Exclusive)
            with pytest.raises(pulsar.ProducerBusy):
                rival_client.create_producer(topic)
            assert not waiter, "the waiter got the topic while the holder still had it"
        holder.close()
        wait_for(lambda: waiter, 30, what="the waiter promoted once the holder closed")
        waiter[0].send(b"waiter-0")
        assert [m.data() for m in read_all(url, topic)] == [b"holder-0", b"holder-1", b"holder-2", b"waiter-0"]
    finally:
        holder_client.close()
        waiter_client.close()
        rival_client.close()


@pytest.mark.parametrize("holder_mode", [Mode.Exclusive, Mode.ExclusiveWithFencing], ids=["Exclusive", "Fencing"])
def test_a_waiter_arriving_first_at_the_destination_does_not_take_the_holders_topic(cluster, holder_mode):
    """The race of the previous test forced: the WaitForExclusive waiter looks
    the topic up *at the destination*, which is paused (SIGSTOP) while the
    source releases the topic, so the destination answers that lookup the
    moment it owns the bundle, before the holder is even told where to go.
    The waiter must queue there, not be granted the topic (which would fence
    the holder that never let go); the holder comes back and keeps writing,
    and, an ExclusiveWithFencing holder too, without fencing the waiter that
    was queued behind it before the move."""
    topic = unique_topic("transit")
    holder_client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
    waiter_client = None
    waiter: list = []
    paused = False
    try:
        holder = holder_client.create_producer(topic, producer_name="holder", access_mode=holder_mode,
                                               batching_enabled=False)
        holder.send(b"holder-0")
        source = owner(cluster, topic)
        # The destination is not the broker the holder's client dials: its
        # lookups must not wait on the paused broker.
        destination = next(m for m in cluster.members if m.broker_id != source and m.index != 0)
        via = next(m for m in cluster.members if m.broker_id != destination.broker_id)
        waiter_client = pulsar.Client(destination.service_url, operation_timeout_seconds=30)
        threading.Thread(target=lambda: waiter.append(waiter_client.create_producer(
            topic, producer_name="waiter", access_mode=Mode.WaitForExclusive, batching_enabled=False)),
            daemon=True).start()
        wait_for(lambda: _publishers(cluster, topic) == ([("holder", holder_mode.name)], 1), 20,
                 what="the waiter queued behind the holder")
        os.kill(destination.pid, signal.SIGSTOP)
        paused = True

        def unload() -> None:
            cluster.admin(via, f"/admin/v2/namespaces/{NS}/{bundle(topic)}/unload"
                               f"?destinationBroker={destination.broker_id}", "PUT")

        mover = threading.Thread(target=unload, daemon=True)
        mover.start()
        wait_for(lambda: _states(cluster, via)[bundle(topic)] == "Assigning", 20,
                 what="the topic released and passed on to the paused destination")
        # The waiter's creation failed over with the release; its client
        # retries after a 100 ms backoff with a lookup that the paused
        # destination will answer first thing. Give it that backoff (this is
        # not a wait for an outcome: the assertions below hold either way).
        time.sleep(1.0)
        os.kill(destination.pid, signal.SIGCONT)
        paused = False
        mover.join(30)
        assert owner(cluster, topic) == destination.broker_id
        wait_for(lambda: _publishers(cluster, topic) == ([("holder", holder_mode.name)], 1), 30,
                 what="the holder back at the destination, the waiter queued behind it")
        holder.send(b"holder-1")
        assert not waiter, "the waiter was granted the topic while its holder was moving"
        move(cluster, topic, source)  # and back, unforced
        wait_for(lambda: _publishers(cluster, topic) == ([("holder", holder_mode.name)], 1), 30,
                 what="the holder back at the source, the waiter queued behind it")
        holder.send(b"holder-2")
        assert not waiter
        holder.close()
        wait_for(lambda: waiter, 30, what="the waiter promoted once the holder closed")
        waiter[0].send(b"waiter-0")
        assert [m.data() for m in read_all(cluster.members[0].service_url, topic)] == [
            b"holder-0", b"holder-1", b"holder-2", b"waiter-0"]
    finally:
        if paused:
            os.kill(destination.pid, signal.SIGCONT)
        holder_client.close()
        if waiter_client is not None:
            waiter_client.close()


def test_a_fencing_takeover_after_moves_fences_the_old_producer_for_good(cluster):
    """An ExclusiveWithFencing producer that crossed two moves is fenced by a
    takeover made after them: its sends fail with ProducerFenced, also after
    yet another move, and the log is the old writer's segment, then the new
    one's, never interleaved. The topic epoch only moves up, also when the
    topic crosses a move with no writer attached."""
    topic = unique_topic("fencing")
    url = cluster.members[0].service_url
    old_client = pulsar.Client(url, operation_timeout_seconds=30)
    new_client = pulsar.Client(url, operation_timeout_seconds=30)
    try:
        old = old_client.create_producer(topic, producer_name="old", access_mode=Mode.ExclusiveWithFencing,
                                         batching_enabled=False, send_timeout_millis=10_000)
        old.send(b"old-0")
        epoch = stats(cluster, topic, internal=True)["topicEpoch"]
        for k, target in enumerate(there_and_back(cluster, topic), start=1):
            move(cluster, topic, target)
            old.send(b"old-%d" % k)  # still the writer, at the epoch it holds
            assert stats(cluster, topic, internal=True)["topicEpoch"] == epoch
        new = new_client.create_producer(topic, producer_name="new", access_mode=Mode.ExclusiveWithFencing,
                                         batching_enabled=False)
        new.send(b"new-0")
        assert stats(cluster, topic, internal=True)["topicEpoch"] == epoch + 1
        with pytest.raises(pulsar.ProducerFenced):
            old.send(b"old-late")
        target = there_and_back(cluster, topic)[0]
        move(cluster, topic, target)
        new.send(b"new-1")
        with pytest.raises(pulsar.ProducerFenced):
            old.send(b"old-later")  # fenced stays fenced on the next owner
        assert stats(cluster, topic, internal=True)["topicEpoch"] == epoch + 1
        # With no writer attached across a move, only the stored epoch tells
        # the new owner where it stands: the next writer's epoch is a new one
        # (an epoch handed out twice would let a zombie of it write again).
        new.close()
        move(cluster, topic, there_and_back(cluster, topic)[0])
        last = new_client.create_producer(topic, producer_name="last", access_mode=Mode.Exclusive,
                                          batching_enabled=False)
        last.send(b"last-0")
        assert stats(cluster, topic, internal=True)["topicEpoch"] == epoch + 2
        assert [m.data() for m in read_all(url, topic)] == [b"old-0", b"old-1", b"old-2", b"new-0", b"new-1",
                                                            b"last-0"]
    finally:
        old_client.close()
        new_client.close()


# -- 2. idempotent producers (our client) ---------------------------------------------------
def _resend(producer, sequence_id: int, pid: int, generation: int, pid_sequence: int, payload: bytes):
    """Send again, as a retry would, an entry numbered ``pid_sequence`` under
    (``pid``, ``generation``): the metadata a resend after a lost receipt
    carries. Returns the broker's answer (a MessageId)."""
    p = producer._p  # the blocking facade's asyncio producer: a retry is built by hand here
    metadata = pb.MessageMetadata(producer_name=p.producer_name(), sequence_id=sequence_id,
                                  publish_time=int(time.time() * 1000), magnetar_pid=pid,
                                  magnetar_generation=generation, magnetar_sequence=pid_sequence)

    async def send():
        return await p.send_entry_nowait(metadata.SerializeToString(), payload, 1, sequence_id)

    return producer._loop.run(send())


def test_an_idempotent_producer_keeps_its_pid_generation_and_sequence(cluster):
    """Our idempotent producer crosses moves with one identity: its pid and
    generation do not change, its numbering continues, a resend of a sequence
    stored before the move is answered as a duplicate (not stored again, not
    a gap), sends pipelined across a move land once each, in order, and a
    zombie holding the older generation stays fenced on the new owner."""
    topic = unique_topic("idempotent")
    url = cluster.members[0].service_url
    client = OurClient(url, operation_timeout_seconds=30)
    successor_client = OurClient(url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, idempotent=True, batching_enabled=False, send_timeout_millis=0)
        pid, generation = producer.pid, producer.generation
        first = [producer.send(b"m%d" % i) for i in range(3)]
        assert [m.offset for m in first] == [0, 1, 2]
        sent = [b"m0", b"m1", b"m2"]
        for k, target in enumerate(there_and_back(cluster, topic)):
            sent += sends_through_a_move(cluster, topic, target, lambda body, i, cb: producer.send_async(body, cb),
                                         b"k%d" % k)
            assert (producer.pid, producer.generation) == (pid, generation)
            # A retry of m1 (sequence 1, stored before every move) is a duplicate.
            answer = _resend(producer, 1, pid, generation, 1, b"m1")
            # Accepted as a duplicate (not a gap, not stored). Only the broker
            # that appended m1 remembers its receipt; a new owner answers
            # with Pulsar's duplicate id, -1:-1 and no offset.
            assert answer.offset in (1, None), answer
            body = b"after-move-%d" % k
            sent.append(body)
            assert producer.send(body).offset == len(sent) - 1  # numbering continued, no gap
        assert producer.next_sequence == len(sent)
        # A takeover after the moves fences the old generation on the current owner.
        successor = successor_client.create_producer(topic, idempotent=True, pid=pid)
        assert (successor.pid, successor.generation, successor.next_sequence) == (pid, generation + 1, len(sent))
        successor.send(b"successor")
        sent.append(b"successor")
        move(cluster, topic, there_and_back(cluster, topic)[0])
        with pytest.raises(our_errors.ProducerFenced):
            producer.send(b"zombie")
    finally:
        client.close()
        successor_client.close()
    stored = read_all(url, topic)
    assert [m.data() for m in stored] == sent


# -- 3. conditional publish (our client) ----------------------------------------------------
def test_an_expected_offset_right_before_a_move_is_honoured_after_it(cluster):
    """The upcoming offset is the same on the new owner: a conditional send
    whose expected offset was right before a move is appended after it, at
    that offset; one that is stale (right once, not any more) is refused with
    the actual upcoming offset, before and after each move, and nothing is
    appended by a refusal."""
    topic = unique_topic("conditional")
    url = cluster.members[0].service_url
    client = OurClient(url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            assert producer.send(b"c%d" % i, expected_offset=i).offset == i
        for k, target in enumerate(there_and_back(cluster, topic)):
            upcoming = client.get_next_offset(topic)
            move(cluster, topic, target)
            assert client.get_next_offset(topic) == upcoming
            assert producer.send(b"moved-%d" % k, expected_offset=upcoming).offset == upcoming
            with pytest.raises(our_errors.ExpectedOffsetMismatch) as refused:
                producer.send(b"stale-%d" % k, expected_offset=upcoming)
            assert refused.value.next_offset == upcoming + 1
        assert client.get_next_offset(topic) == 5
    finally:
        client.close()
    assert [m.data() for m in read_all(url, topic)] == [b"c0", b"c1", b"c2", b"moved-0", b"moved-1"]


def test_conditional_sends_pipelined_across_a_move_land_at_their_offsets(cluster):
    """Conditional sends in flight while the bundle moves (planned after a
    refusal, so in a later offset epoch of the source's producer) are resent
    to the new owner and appended there at exactly the offsets they expected;
    none is refused, none lands twice."""
    topic = unique_topic("conditional-pipelined")
    url = cluster.members[0].service_url
    client = OurClient(url, operation_timeout_seconds=30)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        producer.send(b"first", expected_offset=0)
        with pytest.raises(our_errors.ExpectedOffsetMismatch):
            producer.send(b"stale", expected_offset=0)  # starts offset epoch 1 on this owner
        sent = [b"first"]
        for k, target in enumerate(there_and_back(cluster, topic)):
            base = len(sent)
            sent += sends_through_a_move(
                cluster, topic, target,
                lambda body, i, cb, base=base: producer.send_async(body, cb, expected_offset=base + i), b"p%d" % k)
        assert client.get_next_offset(topic) == len(sent)
    finally:
        client.close()
    stored = read_all(url, topic)
    assert [m.data() for m in stored] == sent


# -- 4. name-based deduplication (official client) ------------------------------------------
def test_a_named_producer_recreated_after_a_move_sees_its_last_sequence_id(cluster):
    """Deduplication by producer name survives moves: the official producer
    re-created under the same name after a move gets ``last_sequence_id``
    from before it, and a resend of a stored sequence id is not stored twice."""
    topic = unique_topic("dedup")
    url = cluster.members[0].service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    sent: list[bytes] = []
    options = dict(producer_name="named-writer", batching_enabled=False,
                   properties={"magnetar.deduplicate": "true"})  # dedup for this producer only
    try:
        producer = client.create_producer(topic, **options)
        for i in range(5):
            producer.send(b"d%d" % i)
            sent.append(b"d%d" % i)
        assert producer.last_sequence_id() == 4
        producer.close()
        for k, target in enumerate(there_and_back(cluster, topic)):
            move(cluster, topic, target)
            producer = client.create_producer(topic, **options)
            last = producer.last_sequence_id()
            assert last == 4 + 3 * k, "the producer's sequence was lost in the move"
            producer.send(b"resent", sequence_id=last - 1)  # a retry of a stored message
            for i in range(3):
                body = b"after-%d-%d" % (k, i)
                producer.send(body)
                sent.append(body)
            producer.close()
    finally:
        client.close()
    assert [m.data() for m in read_all(url, topic)] == sent


# -- 5. cursors with individual acks --------------------------------------------------------
def _backlog(cluster: LocalCluster, topic: str, sub: str) -> int | None:
    s = stats(cluster, topic)
    return None if s is None else s.get("subscriptions", {}).get(sub, {}).get("msgBacklog")


def _receive_set(consumer, count: int, timeout: float = 20.0, quiet_ms: int = 1000) -> list[bytes]:
    """Receive until ``count`` messages came, then until nothing more comes for
    ``quiet_ms`` (anything redelivered that should not be shows up)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            got.append(consumer.receive(timeout_millis=500).data())
        except pulsar.Timeout:
            pass
    while True:
        try:
            got.append(consumer.receive(timeout_millis=quiet_ms).data())
        except pulsar.Timeout:
            return got


def test_a_shared_subscription_gets_only_its_unacknowledged_messages_again(cluster):
    """Individual (non-contiguous) acks survive moves: after each move the
    Shared consumer is sent again exactly the messages it had not
    acknowledged, never one it had."""
    topic = unique_topic("cursor")
    url = cluster.members[0].service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(topic, "shared", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(10):
            producer.send(b"m%d" % i)
        received = {}
        for _ in range(10):
            msg = consumer.receive(timeout_millis=10_000)
            received[msg.data()] = msg
        assert sorted(received) == sorted(b"m%d" % i for i in range(10))
        for i in range(0, 10, 2):
            consumer.acknowledge(received[b"m%d" % i])
        # Acks that reach the source after it released the topic are not
        # carried over (docs/cluster.md): wait until the owner applied them.
        wait_for(lambda: _backlog(cluster, topic, "shared") == 5, 20, what="the even acks applied")
        unacked = [b"m%d" % i for i in range(1, 10, 2)]
        for k, target in enumerate(there_and_back(cluster, topic)):
            move(cluster, topic, target)
            again = _receive_set(consumer, len(unacked))
            assert sorted(again) == sorted(unacked), f"move {k + 1}: redelivered {again}, unacked {unacked}"
            # Ack two more from the new owner, leaving holes between the rest.
            for data in unacked[:2]:
                consumer.acknowledge(received[data])
            unacked = unacked[2:]
            wait_for(lambda n=len(unacked): _backlog(cluster, topic, "shared") == n, 20,
                     what=f"the acks applied on {target}")
    finally:
        client.close()


# -- 6. delayed messages --------------------------------------------------------------------
def test_delayed_messages_scheduled_before_moves_are_delivered_at_their_time(cluster):
    """Messages sent with ``deliver_after`` before two moves are delivered by
    the new owner at their time, not before it and not lost; an undelayed
    message sent with them is delivered at once."""
    topic = unique_topic("delayed")
    url = cluster.members[0].service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    delays = {b"later-6": 6.0, b"later-8": 8.0}
    try:
        consumer = client.subscribe(topic, "delayed", consumer_type=pulsar.ConsumerType.Shared)
        producer = client.create_producer(topic, batching_enabled=False)
        due = {}
        for body, delay in delays.items():
            sent_at = time.time()
            producer.send(body, deliver_after=timedelta(seconds=delay))
            due[body] = sent_at + delay
        producer.send(b"now")
        now = consumer.receive(timeout_millis=10_000)
        assert now.data() == b"now"
        consumer.acknowledge(now)
        wait_for(lambda: _backlog(cluster, topic, "delayed") == 2, 10, what="the ack applied")
        for target in there_and_back(cluster, topic):
            move(cluster, topic, target)
        # Otherwise the test would not show that the schedule crossed the moves.
        assert time.time() < min(due.values()), "the moves took longer than the shortest delay"
        arrived = {}
        deadline = max(due.values()) + 15
        while len(arrived) < len(delays) and time.time() < deadline:
            try:
                msg = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                continue
            arrived[msg.data()] = time.time()
            consumer.acknowledge(msg)
        assert sorted(arrived) == sorted(delays), f"delivered: {sorted(arrived)}"
        for body, at in arrived.items():
            # deliver_at is computed from the client's clock (this machine's).
            assert at >= due[body] - 0.05, f"{body!r} delivered {due[body] - at:.2f} s early"
            assert at <= due[body] + 10, f"{body!r} delivered {at - due[body]:.2f} s late"
    finally:
        client.close()


# -- 7. compaction and schemas --------------------------------------------------------------
class Order(Record):
    id = Integer()
    item = String()


class OrderWithRequiredNote(Record):
    id = Integer()
    item = String()
    note = String(required=True)


def test_a_compacted_view_and_a_schema_are_still_there_after_moves(cluster):
    """A topic compacted before two moves still serves its compacted view
    (latest value per key) from the new owner, and its registered schema is
    still the topic's: the same version is found, a compatible producer
    reuses it and an incompatible one is refused."""
    topic = unique_topic("compacted")
    url = cluster.members[0].service_url
    client = pulsar.Client(url, operation_timeout_seconds=30)
    schema_path = f"/admin/v2/schemas/{NS}/{short(topic)}/schema"
    compaction_path = f"/admin/v2/persistent/{NS}/{short(topic)}/compaction"
    try:
        producer = client.create_producer(topic, schema=AvroSchema(Order), batching_enabled=False)
        for i, (key, item) in enumerate([("a", "apple"), ("b", "bread"), ("a", "avocado"), ("c", "cheese"),
                                         ("b", "butter")]):
            producer.send(Order(id=i, item=item), partition_key=key)
        producer.close()
        before = cluster.admin(member(cluster, owner(cluster, topic)), schema_path)
        cluster.admin(member(cluster, owner(cluster, topic)), compaction_path, "PUT")
        wait_for(lambda: cluster.admin(member(cluster, owner(cluster, topic)), compaction_path)["status"] == "SUCCESS",
                 20, what="compaction to succeed")
        expected = [("a", "avocado"), ("b", "butter"), ("c", "cheese")]

        def compacted_view() -> list[tuple[str, str]]:
            reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=True,
                                          schema=AvroSchema(Order))
            out = []
            while reader.has_message_available():
                msg = reader.read_next(10_000)
                out.append((msg.partition_key(), msg.value().item))
            reader.close()
            return sorted(out)

        assert compacted_view() == expected
        for k, target in enumerate(there_and_back(cluster, topic)):
            move(cluster, topic, target)
            assert compacted_view() == expected, f"the compacted view after move {k + 1}"
            after = cluster.admin(member(cluster, target), schema_path)
            assert (after["version"], after["type"], after["data"]) == (before["version"], before["type"],
                                                                       before["data"])
            client.create_producer(topic, schema=AvroSchema(Order)).close()
            with pytest.raises(pulsar.IncompatibleSchema):
                client.create_producer(topic, schema=AvroSchema(OrderWithRequiredNote))
        # The full log is still there beside the view.
        assert len(read_all(url, topic)) == 5
        assert cluster.admin(member(cluster, owner(cluster, topic)), schema_path)["version"] == before["version"]
    finally:
        client.close()


# -- 8. the destination dies mid-transfer ---------------------------------------------------
@pytest.fixture
def own_cluster(tmp_path):
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=3.0).start()
    yield c
    c.stop()


@pytest.mark.parametrize("when", ["paused-before-taking", "killed-after-taking"])
def test_a_destination_killed_during_a_move_loses_nothing_acknowledged(own_cluster, when):
    """kill -9 of the destination in the middle of a move: either paused
    (SIGSTOP) before it could take the bundle, then killed, so the bundle is
    stuck Assigning to a dead broker; or killed right after it took the
    bundle, while the clients are being sent to it. The leader reassigns the
    bundle once the dead broker's session ends; the clients, which keep
    sending and receiving throughout, reach the new owner; no send fails,
    every acknowledged message is stored exactly once (deduplication settles
    resends) and is received; a later move works as usual."""
    cluster = own_cluster
    via = cluster.members[0]  # the clients' service URL and our admin: never the victim
    topic = unique_topic("victim")
    client = pulsar.Client(via.service_url, operation_timeout_seconds=60)
    acked: list[int] = []
    received: set[int] = set()
    errors: list[BaseException] = []
    stop = threading.Event()
    produced = threading.Event()
    threads: list[threading.Thread] = []
    try:
        consumer = client.subscribe(topic, "check", consumer_type=pulsar.ConsumerType.Shared)
        # A subscription that never acknowledges keeps the whole log from
        # being trimmed (retention is off), so it can be read back at the end.
        client.subscribe(topic, "keep", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1)
        producer = client.create_producer(topic, producer_name="p-victim", batching_enabled=False,
                                          send_timeout_millis=60_000, properties={"magnetar.deduplicate": "true"})

        def produce() -> None:
            i = 0
            while not stop.is_set():
                try:
                    producer.send(b"%d" % i)
                except Exception as exc:  # noqa: BLE001  (the test asserts there is none)
                    errors.append(exc)
                    return
                acked.append(i)
                i += 1

        def consume() -> None:
            # Until the producer is done and everything it had acknowledged came.
            while not (produced.is_set() and set(acked) <= received):
                try:
                    msg = consumer.receive(timeout_millis=500)
                except pulsar.Timeout:
                    continue
                except Exception as exc:  # noqa: BLE001  (closed at the end of a failed test)
                    errors.append(exc)
                    return
                received.add(int(msg.data()))
                consumer.acknowledge(msg)

        threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
        for t in threads:
            t.start()
        wait_for(lambda: len(received) >= 50, 30, what="traffic flowing")
        source = owner(cluster, topic)
        victim = next(m for m in cluster.members if m.broker_id not in (source, via.broker_id))
        path = f"/admin/v2/namespaces/{NS}/{bundle(topic)}/unload?destinationBroker={victim.broker_id}"
        if when == "paused-before-taking":
            os.kill(victim.pid, signal.SIGSTOP)

            def unload() -> None:  # waits for an Owned(victim) that never comes: its answer is irrelevant
                try:
                    cluster.admin(via, path, "PUT")
                except Exception:  # noqa: BLE001
                    pass

            threading.Thread(target=unload, daemon=True).start()
            # The source released the topic and passed the bundle on to the paused broker.
            wait_for(lambda: _states(cluster, via)[bundle(topic)] == "Assigning", 20,
                     what="the bundle passed on to the paused destination")
        else:
            cluster.admin(via, path, "PUT")
            assert owner(cluster, topic) == victim.broker_id
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        count = len(acked)
        wait_for(lambda: owner(cluster, topic) not in (None, victim.broker_id), cluster.session_ttl + 15,
                 what="the leader reassigning the bundle of the dead destination")
        reassigned = owner(cluster, topic)
        wait_for(lambda: len(acked) >= count + 50, 30, what="the producer sending again")
        recovered = time.monotonic() - killed_at
        # One more move between the survivors, as on a healthy cluster.
        move(cluster, topic, next(m.broker_id for m in live(cluster) if m.broker_id != reassigned))
        count = len(acked)
        wait_for(lambda: len(acked) >= count + 50, 30, what="the producer sending after the last move")
        stop.set()
        threads[0].join(60)
        produced.set()  # only now is ``acked`` final
        threads[1].join(60)
        assert not errors, errors
        assert set(acked) <= received, f"{len(set(acked) - received)} acknowledged messages never received"
        print(f"{when}: sending again {recovered:.1f} s after kill -9 (session TTL {cluster.session_ttl} s)")
    finally:
        stop.set()
        produced.set()
        client.close()
    stored = [int(m.data()) for m in read_all(via.service_url, topic)]
    assert stored[:len(acked)] == acked, "the stored log is not the acknowledged sends, once each, in order"
    assert len(stored) <= len(acked) + 1  # at most the one send in flight when the producer stopped
