"""Topic compaction: admin trigger, size threshold, read_compacted readers, table views."""
from __future__ import annotations

import socket

import pulsar

from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command

from tests.helpers import wait_for
from .admin_support import call
from magnetar_harness.broker import configured_broker

PATH = "persistent/public/default/{}/compaction"


def _compact(broker, topic: str) -> None:
    status, _ = call(broker, "PUT", PATH.format(topic))
    assert status == 204
    wait_for(lambda: call(broker, "GET", PATH.format(topic))[1]["status"] == "SUCCESS", timeout=20,
             what="compaction to succeed")


def _read_all(client, topic, compacted=True) -> list[tuple[str, bytes]]:
    reader = client.create_reader(topic, pulsar.MessageId.earliest, is_read_compacted=compacted)
    out = []
    while reader.has_message_available():
        msg = reader.read_next(timeout_millis=5000)
        out.append((msg.partition_key(), msg.data()))
    reader.close()
    return out


def _produce_history(client, topic):
    """Ten keys with three values each, tombstones for k1 (null) and k2 (empty), keyless messages."""
    batched = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=50,
                                     compression_type=pulsar.CompressionType.LZ4)
    for r in range(3):
        for k in range(10):
            batched.send_async(f"k{k}={r}".encode(), None, partition_key=f"k{k}")
        batched.send_async(b"no key", None)
    batched.flush()
    single = client.create_producer(topic, batching_enabled=False)
    single.send(None, partition_key="k1")  # null value: a tombstone
    single.send(b"", partition_key="k2")  # empty payload: a tombstone too
    single.send(b"k3=final", partition_key="k3")
    return single


def _expected_view():
    latest = {f"k{k}": f"k{k}=2".encode() for k in range(10)}
    del latest["k1"], latest["k2"]
    latest["k3"] = b"k3=final"
    return latest


def test_admin_compaction_and_compacted_reads(broker, pulsar_client):
    topic = "compacted"
    assert call(broker, "GET", PATH.format(topic))[0] == 404
    single = _produce_history(pulsar_client, topic)
    assert call(broker, "GET", PATH.format(topic))[1] == {"status": "NOT_RUN", "lastError": ""}
    _compact(broker, topic)
    view = _read_all(pulsar_client, topic)
    assert dict(view) == _expected_view()
    assert len(view) == len(_expected_view())  # one message per key, nothing else
    # Non-compacted readers still see the whole log.
    assert len(_read_all(pulsar_client, topic, compacted=False)) == 36
    # After the horizon the tail is read as is; a second compaction is incremental.
    single.send(b"k4=new", partition_key="k4")
    single.send(None, partition_key="k5")
    tail = _read_all(pulsar_client, topic)
    assert tail[-2:] == [("k4", b"k4=new"), ("k5", b"")]
    _compact(broker, topic)
    expected = _expected_view()
    expected["k4"] = b"k4=new"
    del expected["k5"]
    view = _read_all(pulsar_client, topic)
    assert dict(view) == expected and len(view) == len(expected)
    # The view is durable.
    broker.restart()
    assert dict(_read_all(pulsar_client, topic)) == expected
    # A compacted durable subscription (Exclusive) reads the same view.
    consumer = pulsar_client.subscribe(topic, "compacted-sub", is_read_compacted=True,
                                       initial_position=pulsar.InitialPosition.Earliest)
    got = {}
    for _ in range(len(expected)):
        msg = consumer.receive(timeout_millis=5000)
        got[msg.partition_key()] = msg.data()
        consumer.acknowledge_cumulative(msg)
    assert got == expected


def test_read_compacted_is_refused_on_shared_subscriptions(broker):
    # The official client refuses this itself: ask the broker directly.
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(command(Type.CONNECT, client_version="raw-test", protocol_version=20)))
    frames: list = []

    def read(n):
        while len(frames) < n:
            frames.extend(conn.receive_data(sock.recv(65536)))

    read(1)
    sock.sendall(conn.send(command(Type.SUBSCRIBE, topic="compacted-shared", subscription="s", subType=1,
                                   consumer_id=1, request_id=1, read_compacted=True)))
    read(2)
    assert frames[1].command.type == Type.ERROR
    assert frames[1].command.error.error == pb.NotAllowedError
    sock.close()


def test_official_table_view(broker, pulsar_client):
    topic = "table-view"
    single = _produce_history(pulsar_client, topic)
    _compact(broker, topic)
    single.send(b"k6=after", partition_key="k6")
    table = pulsar_client.create_table_view(topic)
    expected = _expected_view()
    expected["k6"] = b"k6=after"
    seen = {}
    table.for_each(lambda k, v: seen.__setitem__(k, v))
    assert seen == expected
    single.send(b"k7=live", partition_key="k7")
    single.send(None, partition_key="k8")
    wait_for(lambda: table.get("k7") == b"k7=live" and table.get("k8") is None, what="live updates")
    table.close()


def test_our_client_table_view(broker):
    from magnetar.client import Client

    topic = "table-view-ours"
    official = pulsar.Client(broker.service_url)
    try:
        single = _produce_history(official, topic)
        _compact(broker, topic)
        client = Client(broker.service_url)
        try:
            table = client.create_table_view(topic)
            assert table.snapshot() == _expected_view()
            single.send(b"k9=live", partition_key="k9")
            single.send(None, partition_key="k0")
            wait_for(lambda: table.get("k9") == b"k9=live" and "k0" not in table, what="live updates")
            table.close()
        finally:
            client.close()
    finally:
        official.close()


def test_size_threshold_triggers_compaction(tmp_path):
    broker = configured_broker(
        tmp_path, "compaction_threshold_bytes = 1000\ncompaction_check_interval_s = 0.2\n"
    ).start()
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        producer = client.create_producer("threshold", batching_enabled=False)
        for i in range(50):
            producer.send(f"value-{i}".encode() * 5, partition_key=f"k{i % 5}")
        wait_for(lambda: call(broker, "GET", PATH.format("threshold"))[1]["status"] == "SUCCESS", timeout=20,
                 what="a compaction started by the size threshold")
        view = _read_all(client, "threshold")
        assert {k for k, _ in view} == {f"k{i}" for i in range(5)}
    finally:
        client.close()
        assert broker.stop() == 0
