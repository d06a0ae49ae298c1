"""Bad bytes close one connection; the broker and its other clients carry on."""
from __future__ import annotations

import os
import socket
import struct

import pulsar
import pytest

from magnetar.protocol import Connection, Role, pb
from magnetar.protocol.commands import Type, command
from magnetar.protocol.frames import FrameDecoder, encode_send


def _raw(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return sock


def _closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def _handshake(sock):
    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(command(Type.CONNECT, client_version="raw-test", protocol_version=20)))
    frames = []
    while not frames:
        frames = conn.receive_data(sock.recv(65536))
    assert frames[0].command.type == Type.CONNECTED
    return conn


def _read_frames(sock, conn, want: int):
    frames = []
    while len(frames) < want:
        data = sock.recv(65536)
        assert data, "connection closed"
        frames.extend(conn.receive_data(data))
    return frames


def _check_store_intact(pulsar_client, topic, expected):
    reader = pulsar_client.create_reader(topic, pulsar.MessageId.earliest)
    got = [reader.read_next(5000).data() for _ in range(len(expected))]
    assert got == expected
    reader.close()


@pytest.mark.parametrize(
    "garbage",
    [
        os.urandom(4096),
        struct.pack(">I", 2**31) + b"\x00" * 64,  # a frame that claims 2 GiB
        struct.pack(">II", 100, 200) + b"\x01" * 96,  # command size larger than the frame
        struct.pack(">I", 2),  # a frame too small to hold a command size
    ],
    ids=["random", "two-gib", "bad-command-size", "tiny"],
)
def test_garbage_closes_only_that_connection(broker, pulsar_client, garbage):
    producer = pulsar_client.create_producer("intact")
    producer.send(b"before")
    sock = _raw(broker)
    sock.sendall(garbage)
    assert _closed_by_peer(sock)
    sock.close()
    # Garbage after a good handshake, too.
    sock = _raw(broker)
    _handshake(sock)
    sock.sendall(garbage)
    assert _closed_by_peer(sock)
    producer.send(b"after")
    _check_store_intact(pulsar_client, "intact", [b"before", b"after"])
    assert broker.alive


def test_truncated_frame_then_hangup(broker, pulsar_client):
    sock = _raw(broker)
    conn = _handshake(sock)
    frame = conn.send(command(Type.PING))
    sock.sendall(frame[: len(frame) - 2])
    sock.close()
    producer = pulsar_client.create_producer("after-truncation")
    producer.send(b"ok")
    _check_store_intact(pulsar_client, "after-truncation", [b"ok"])


def test_wrong_checksum_gets_checksum_error_and_stores_nothing(broker, pulsar_client):
    sock = _raw(broker)
    conn = _handshake(sock)
    sock.sendall(conn.send(command(Type.PRODUCER, topic="checksum", producer_id=1, request_id=1)))
    (ok,) = _read_frames(sock, conn, 1)
    assert ok.command.type == Type.PRODUCER_SUCCESS
    md = pb.MessageMetadata(producer_name=ok.command.producer_success.producer_name, sequence_id=0,
                            publish_time=1).SerializeToString()
    good = encode_send(command(Type.SEND, producer_id=1, sequence_id=0), md, b"good")
    bad = bytearray(encode_send(command(Type.SEND, producer_id=1, sequence_id=1), md, b"evil"))
    bad[-1] ^= 0x55
    sock.sendall(good + bytes(bad))
    receipt, refusal = _read_frames(sock, conn, 2)
    assert receipt.command.type == Type.SEND_RECEIPT
    assert refusal.command.type == Type.SEND_ERROR
    assert refusal.command.send_error.error == pb.ChecksumError
    sock.close()
    _check_store_intact(pulsar_client, "checksum", [b"good"])
    reader = pulsar_client.create_reader("checksum", pulsar.MessageId.earliest)
    reader.read_next(5000)
    assert not reader.has_message_available()


def test_bad_requests_get_errors_not_crashes(broker):
    sock = _raw(broker)
    conn = _handshake(sock)
    sock.sendall(conn.send(command(Type.PRODUCER, topic="persistent://a/b/c/d", producer_id=1, request_id=7)))
    sock.sendall(conn.send(command(Type.LOOKUP, topic="bad://x", request_id=8)))
    sock.sendall(conn.send(command(Type.FLOW, consumer_id=99, messagePermits=10)))
    sock.sendall(conn.send(command(Type.SUBSCRIBE, topic="bad://x/y/z", subscription="s", subType=1,
                                   consumer_id=1, request_id=9)))
    frames = _read_frames(sock, conn, 3)
    by_type = {f.command.type: f.command for f in frames}
    errors = {f.command.error.request_id: f.command.error.error for f in frames if f.command.type == Type.ERROR}
    assert errors == {7: pb.InvalidTopicName, 9: pb.InvalidTopicName}
    assert by_type[Type.LOOKUP_RESPONSE].lookupTopicResponse.response == pb.CommandLookupTopicResponse.Failed
    sock.close()
    assert broker.alive


def _with_bad_text(conn, cmd) -> bytes:
    """``cmd`` framed, its marker text ``AAAA`` replaced by bytes that are not UTF-8
    (same length: the frame's sizes stay right; the CRC-less command frame has no checksum)."""
    return conn.send(cmd).replace(b"AAAA", b"\xff\xfe\xfd\xfc")


def test_text_fields_that_are_not_utf8_get_clear_errors_and_the_connection_serves_on(broker):
    sock = _raw(broker)
    conn = _handshake(sock)
    bad_topic = "persistent://public/default/AAAA"
    sock.sendall(_with_bad_text(conn, command(Type.LOOKUP, topic=bad_topic, request_id=1)))
    sock.sendall(_with_bad_text(conn, command(Type.PARTITIONED_METADATA, topic=bad_topic, request_id=2)))
    sock.sendall(_with_bad_text(conn, command(Type.PRODUCER, topic="persistent://public/default/t", producer_id=1,
                                              request_id=3, producer_name="AAAA")))
    sock.sendall(_with_bad_text(conn, command(Type.SUBSCRIBE, topic=bad_topic, subscription="s", subType=0,
                                              consumer_id=1, request_id=4)))
    frames = _read_frames(sock, conn, 4)
    by_type = {f.command.type: f.command for f in frames}
    lookup = by_type[Type.LOOKUP_RESPONSE].lookupTopicResponse
    assert (lookup.response, lookup.error) == (pb.CommandLookupTopicResponse.Failed, pb.InvalidTopicName)
    assert "not valid UTF-8" in lookup.message
    meta = by_type[Type.PARTITIONED_METADATA_RESPONSE].partitionMetadataResponse
    assert (meta.response, meta.error) == (pb.CommandPartitionedTopicMetadataResponse.Failed, pb.InvalidTopicName)
    errors = {f.command.error.request_id: f.command.error.error for f in frames if f.command.type == Type.ERROR}
    assert errors == {3: pb.NotAllowedError, 4: pb.InvalidTopicName}
    # The same connection still answers a good request.
    sock.sendall(conn.send(command(Type.LOOKUP, topic="persistent://public/default/fine", request_id=5)))
    answer = next(f for f in _read_frames(sock, conn, 1) if f.command.type == Type.LOOKUP_RESPONSE)
    assert answer.command.lookupTopicResponse.response == pb.CommandLookupTopicResponse.Connect
    sock.close()
    assert broker.alive


def test_a_subscription_may_not_take_a_replicator_cursors_name(pulsar_client):
    """``pulsar.repl.<cluster>`` cursors belong to geo-replication: a consumer
    acking through one would drop entries another region has not received."""
    with pytest.raises(pulsar.NotAllowedError):
        pulsar_client.subscribe("persistent://public/default/repl-name", "pulsar.repl.west")
    consumer = pulsar_client.subscribe("persistent://public/default/repl-name", "ordinary")
    consumer.close()


def test_frames_for_a_consumer_whose_subscribe_is_pending_get_answers_not_tracebacks(broker):
    """Found by the live fuzzer: FLOW, ACK, GET_LAST_MESSAGE_ID and
    CLOSE_CONSUMER right behind a SUBSCRIBE that is still loading its topic
    raised AttributeError inside the broker (and a lost connection then left
    its tasks running). Now they are answered, and a consumer closed while
    subscribing is not left attached to the subscription."""
    sock = _raw(broker)
    conn = _handshake(sock)
    topic = "persistent://public/default/pending-subscribe"
    burst = b"".join([
        conn.send(command(Type.SUBSCRIBE, topic=topic, subscription="s", subType=pb.CommandSubscribe.Exclusive,
                          consumer_id=1, request_id=1)),
        conn.send(command(Type.FLOW, consumer_id=1, messagePermits=10)),
        conn.send(command(Type.ACK, consumer_id=1, ack_type=pb.CommandAck.Individual, request_id=2,
                          message_id=[pb.MessageIdData(ledgerId=0, entryId=0)])),
        conn.send(command(Type.GET_LAST_MESSAGE_ID, consumer_id=1, request_id=3)),
        conn.send(command(Type.CLOSE_CONSUMER, consumer_id=1, request_id=4)),
        conn.send(command(Type.SUBSCRIBE, topic=topic, subscription="", subType=pb.CommandSubscribe.Shared,
                          consumer_id=2, request_id=5)),
    ])
    sock.sendall(burst)
    answers = {}
    while len(answers) < 5:
        for frame in _read_frames(sock, conn, 1):
            cmd = frame.command
            inner = {Type.SUCCESS: cmd.success, Type.ERROR: cmd.error, Type.ACK_RESPONSE: cmd.ackResponse,
                     Type.GET_LAST_MESSAGE_ID_RESPONSE: cmd.getLastMessageIdResponse}.get(cmd.type)
            if inner is not None:
                answers[inner.request_id] = cmd
    assert answers[5].type == Type.ERROR and answers[5].error.error == pb.ServerError.Value("NotAllowedError")  # no name
    assert answers[4].type == Type.SUCCESS  # closed
    # The consumer closed while subscribing is not attached: another takes the Exclusive subscription.
    sock.sendall(conn.send(command(Type.SUBSCRIBE, topic=topic, subscription="s",
                                   subType=pb.CommandSubscribe.Exclusive, consumer_id=3, request_id=6)))
    while True:
        done = [f for f in _read_frames(sock, conn, 1) if f.command.type in (Type.SUCCESS, Type.ERROR)
                and (f.command.success.request_id if f.command.type == Type.SUCCESS else f.command.error.request_id) == 6]
        if done:
            assert done[0].command.type == Type.SUCCESS, done[0].command
            break
    sock.close()
    assert "Traceback" not in broker.log()


def test_a_producer_closed_while_it_is_being_created_leaves_nothing_behind(broker):
    """A client that gives up waiting for PRODUCER_SUCCESS (its wait timed out
    or was cancelled) sends CLOSE_PRODUCER. The broker handled that close
    before the creation had registered anything, the creation then finished,
    and a producer nobody owned kept the name (and exclusive access) for as
    long as the connection lived: found by the regions chaos run, where a
    geo-replicator could no longer reconnect ("already connected")."""
    sock = _raw(broker)
    conn = _handshake(sock)
    topic = "persistent://public/default/closed-while-created"

    def producer(producer_id, request_id):
        return conn.send(command(Type.PRODUCER, topic=topic, producer_id=producer_id, request_id=request_id,
                                 producer_name="only-one", user_provided_producer_name=True,
                                 producer_access_mode=pb.Exclusive))

    def answer(request_id):
        while True:
            for frame in _read_frames(sock, conn, 1):
                cmd = frame.command
                inner = {Type.SUCCESS: cmd.success, Type.ERROR: cmd.error,
                         Type.PRODUCER_SUCCESS: cmd.producer_success}.get(cmd.type)
                if inner is not None and inner.request_id == request_id:
                    return cmd

    # The topic is new: the creation waits for it to load, the close does not.
    sock.sendall(producer(1, 1) + conn.send(command(Type.CLOSE_PRODUCER, producer_id=1, request_id=2)))
    assert answer(2).type == Type.SUCCESS
    assert answer(1).type == Type.ERROR
    # The name and the exclusive access are free: a new producer id gets them.
    sock.sendall(producer(2, 3))
    created = answer(3)
    assert created.type == Type.PRODUCER_SUCCESS, created
    # A retried PRODUCER for the same id, closed and sent again in one burst,
    # ends with that id registered once.
    sock.sendall(conn.send(command(Type.CLOSE_PRODUCER, producer_id=2, request_id=4)) + producer(5, 5)
                 + conn.send(command(Type.CLOSE_PRODUCER, producer_id=5, request_id=6)) + producer(5, 7))
    assert answer(4).type == Type.SUCCESS
    assert answer(7).type == Type.PRODUCER_SUCCESS
    sock.sendall(producer(6, 8))
    assert answer(8).type == Type.ERROR  # id 5 holds the exclusive access
    sock.close()
    assert "Traceback" not in broker.log()
