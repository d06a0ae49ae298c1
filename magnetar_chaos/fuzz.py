"""A live-socket fuzzer: mutated real frames at a running broker.

Each round opens a connection and plays a real conversation (CONNECT,
LOOKUP, PARTITIONED_METADATA, PRODUCER, SEND with a checksummed payload,
SUBSCRIBE, FLOW, ACK, ...), frame by frame, with some frames mutated: bits
flipped, bytes cut off, length fields lied about, the command's bytes
replaced by random ones, or (half the time) a well-framed command whose
fields hold hostile values (empty, huge, out of range, unknown enum values);
frames repeated or sent out of order, garbage between frames. The handshake
is mostly left intact, so the damage reaches the handlers behind it. It reads whatever comes back until the broker answers,
closes, or a short timeout passes.

Meanwhile a canary (Magnetar's client) produces and consumes on its own
topic. The verdict: the broker process is alive, it still answers a fresh
client, the canary got every message it sent, and the broker's resident
memory grew by less than a bound. Failure modes: none raised; the
:class:`FuzzReport` says what went wrong.

Against a cluster (:func:`fuzz_cluster`, three brokers on etcd as
:class:`.systems.ClusterSystem` starts them) one broker is fuzzed; the rounds
pick among several topics, some owned by the fuzzed broker and some by the
others, so the damaged LOOKUPs are answered with redirects and the damaged
PRODUCER and SUBSCRIBE frames meet topics the broker does not serve. Two
canaries work meanwhile: one connected to the fuzzed broker on a topic it
owns, one connected to another broker on a topic that one owns. The verdict
adds: every broker process alive and answering a fresh client. A canary
whose topic moved (the fuzzed broker lost its session under the load) follows
it and must still get all it sent.
"""
from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass, field

from google.protobuf.descriptor import FieldDescriptor as fd_

from magnetar.protocol import Type, command, pb
from magnetar.protocol.frames import checksummed_block, encode_command, encode_payload_command

_U32 = struct.Struct(">I")


def conversation(topic: str) -> list[bytes]:
    """The frames of one well-formed client session, in order."""
    meta = pb.MessageMetadata(producer_name="fuzz", sequence_id=0, publish_time=int(time.time() * 1000))
    send_block = checksummed_block(meta.SerializeToString(), b"fuzz payload")
    frames = [
        command(Type.CONNECT, client_version="fuzz", protocol_version=21),
        command(Type.PARTITIONED_METADATA, topic=topic, request_id=1),
        command(Type.LOOKUP, topic=topic, request_id=2, authoritative=False),
        command(Type.PRODUCER, topic=topic, producer_id=1, request_id=3, producer_name="fuzz"),
        None,  # the SEND, a payload frame
        command(Type.SUBSCRIBE, topic=topic, subscription="fuzz", subType=pb.CommandSubscribe.Shared,
                consumer_id=1, request_id=4),
        command(Type.FLOW, consumer_id=1, messagePermits=100),
        command(Type.ACK, consumer_id=1, ack_type=pb.CommandAck.Individual,
                message_id=[pb.MessageIdData(ledgerId=0, entryId=0)]),
        command(Type.GET_LAST_MESSAGE_ID, consumer_id=1, request_id=5),
        command(Type.GET_TOPICS_OF_NAMESPACE, namespace="public/default", request_id=6),
        command(Type.PING),
        command(Type.CLOSE_PRODUCER, producer_id=1, request_id=7),
        command(Type.CLOSE_CONSUMER, consumer_id=1, request_id=8),
    ]
    out = []
    for cmd in frames:
        if cmd is None:
            out.append(b"".join(bytes(p) for p in encode_payload_command(
                command(Type.SEND, producer_id=1, sequence_id=0, num_messages=1), send_block)))
        else:
            out.append(encode_command(cmd))
    return out


_STRINGS = ["", "x" * 70_000, "persistent://", "a/b/c/d/e/f", "non-persistent://public/default/../../etc",
            "\u00e9\u4e2d\U0001F600", "public/default/t\x00", " ", "-partition-99999999999", "\n"]
_NUMBERS = [0, 1, 2, 255, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 63 - 1, 2 ** 64 - 1]


def mutate_fields(frame: bytes, rng: random.Random) -> bytes:
    """The same command with some of its fields given hostile values (empty,
    huge, out of range, unknown enum values), framed correctly: what gets
    past the decoder to the handlers."""
    (size,) = _U32.unpack_from(frame, 4)
    cmd = pb.BaseCommand()
    cmd.ParseFromString(frame[8:8 + size])
    payload = frame[8 + size:]
    inner = getattr(cmd, cmd.DESCRIPTOR.fields_by_number[cmd.type].name) if cmd.type in \
        cmd.DESCRIPTOR.fields_by_number else None
    target = inner if inner is not None else cmd
    for fd in target.DESCRIPTOR.fields:
        if fd.is_repeated or fd.type == fd_.TYPE_MESSAGE or rng.random() < 0.5:
            continue
        try:
            if fd.type in (fd_.TYPE_STRING,):
                setattr(target, fd.name, rng.choice(_STRINGS))
            elif fd.type == fd_.TYPE_BYTES:
                setattr(target, fd.name, bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 64]))))
            elif fd.type == fd_.TYPE_BOOL:
                setattr(target, fd.name, rng.random() < 0.5)
            elif fd.type == fd_.TYPE_ENUM:
                setattr(target, fd.name, rng.randrange(64))
            elif fd.type in (fd_.TYPE_INT32, fd_.TYPE_SINT32, fd_.TYPE_SFIXED32):
                setattr(target, fd.name, rng.choice([0, 1, -1, 2 ** 31 - 1, -(2 ** 31)]))
            elif fd.type in (fd_.TYPE_INT64, fd_.TYPE_SINT64, fd_.TYPE_SFIXED64):
                setattr(target, fd.name, rng.choice([0, 1, -1, 2 ** 63 - 1, -(2 ** 63)]))
            elif fd.type in (fd_.TYPE_UINT32, fd_.TYPE_FIXED32):
                setattr(target, fd.name, rng.choice([n for n in _NUMBERS if n < 2 ** 32]))
            elif fd.type in (fd_.TYPE_UINT64, fd_.TYPE_FIXED64):
                setattr(target, fd.name, rng.choice(_NUMBERS))
            elif fd.type in (fd_.TYPE_DOUBLE, fd_.TYPE_FLOAT):
                setattr(target, fd.name, rng.choice([0.0, -1.0, float("inf"), float("nan")]))
        except (ValueError, TypeError):
            continue  # a closed enum refuses an unknown value: leave that field
    body = cmd.SerializePartialToString()
    return _U32.pack(4 + len(body) + len(payload)) + _U32.pack(len(body)) + body + payload


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One frame, damaged in one of several ways a broken or hostile client might."""
    if rng.random() < 0.5:
        return mutate_fields(frame, rng)
    kind = rng.randrange(8)
    data = bytearray(frame)
    if kind == 0:  # flip a few bits anywhere
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # cut the frame short
        del data[rng.randrange(1, len(data)):]
    elif kind == 2:  # the total size lies (bigger or smaller)
        data[0:4] = _U32.pack(max(0, len(data) - 4 + rng.choice([-3, -1, 1, 7, 1 << 20, (1 << 31) - 1])))
    elif kind == 3:  # the command size lies
        data[4:8] = _U32.pack(rng.choice([0, 1, len(data), (1 << 32) - 1]))
    elif kind == 4:  # the command's bytes replaced by random ones (sizes kept)
        (size,) = _U32.unpack_from(data, 4)
        for i in range(8, min(8 + size, len(data))):
            if rng.random() < 0.3:
                data[i] = rng.randrange(256)
    elif kind == 5:  # random bytes appended (a second, broken frame)
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == 6:  # a huge declared frame with little behind it
        return _U32.pack((1 << 31) - 1) + bytes(data[4:])
    else:  # pure noise of the frame's length
        return bytes(rng.randrange(256) for _ in range(len(data)))
    return bytes(data)


def _round(host: str, port: int, frames: list[bytes], rng: random.Random, timeout: float) -> None:
    plan = list(frames)
    if rng.random() < 0.3:
        rng.shuffle(plan)  # out of order: a SEND before its PRODUCER, a FLOW before SUBSCRIBE...
    if rng.random() < 0.3:
        plan += rng.sample(plan, k=min(3, len(plan)))  # repeats
    # Mostly after a good handshake, so the damage reaches the handlers behind it.
    first = 1 if rng.random() < 0.8 else 0
    damaged = {rng.randrange(first, len(plan)) for _ in range(rng.randint(1, 3))}
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            for i, frame in enumerate(plan):
                sock.sendall(mutate(frame, rng) if i in damaged else frame)
            sock.settimeout(timeout)
            try:
                while sock.recv(65536):
                    pass
            except (socket.timeout, ConnectionError):
                pass
    except OSError:
        pass  # the broker closed on us (what it should do with garbage), or refused


@dataclass
class FuzzReport:
    rounds: int = 0
    canary_sent: int = 0
    canary_received: int = 0
    rss_before_kb: int = 0
    rss_after_kb: int = 0
    problems: list[str] = field(default_factory=list)
    #: Cluster only: how many of the fuzzed topics the fuzzed broker owned
    #: at the start (the rest are redirects and refusals).
    owned_by_target: int | None = None
    topics: int = 1

    @property
    def clean(self) -> bool:
        return not self.problems


def rss_kb(pid: int) -> int:
    """Resident memory of process ``pid`` in kB (0 if unknown)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class _Canary(threading.Thread):
    """Produces and consumes on its own topic, through the fuzzing."""

    def __init__(self, service_url: str, topic: str | None = None, name: str = "canary") -> None:
        super().__init__(daemon=True)
        self.service_url = service_url
        self.name_ = name  # for the report (Thread.name is the thread's own)
        self.topic = topic or f"persistent://public/default/fuzz-canary-{uuid.uuid4().hex[:8]}"
        self.stop_event = threading.Event()
        self.sent: list[bytes] = []
        self.received: set[bytes] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        from magnetar.client import Client, InitialPosition

        client = Client(self.service_url, operation_timeout_seconds=30)
        try:
            consumer = client.subscribe(self.topic, "canary", initial_position=InitialPosition.Earliest)
            producer = client.create_producer(self.topic)
            i = 0
            while not self.stop_event.is_set():
                value = f"canary-{i}".encode()
                producer.send(value)
                self.sent.append(value)
                i += 1
                while True:
                    try:
                        msg = consumer.receive(10)
                    except Exception:
                        break
                    self.received.add(msg.data())
                    consumer.acknowledge(msg)
                time.sleep(0.02)
            deadline = time.monotonic() + 10
            while len(self.received) < len(self.sent) and time.monotonic() < deadline:
                try:
                    msg = consumer.receive(500)
                except Exception:
                    continue
                self.received.add(msg.data())
                consumer.acknowledge(msg)
        except BaseException as exc:
            self.error = exc
        finally:
            client.close()


def fuzz(host: str, port: int, rounds: int, seed: int, broker_pid: int | None = None,
         timeout: float = 0.3, max_rss_growth_kb: int = 200_000) -> FuzzReport:
    """Play ``rounds`` damaged conversations at ``host:port``; see the module docstring."""
    canary = _Canary(f"pulsar://{host}:{port}")
    return _fuzz(host, port, rounds, seed, [f"persistent://public/default/fuzz-{seed}"], [canary],
                 {"broker": broker_pid} if broker_pid is not None else {}, broker_pid, [(host, port)],
                 timeout, max_rss_growth_kb)


def _fuzz(host: str, port: int, rounds: int, seed: int, topics: list[str], canaries: list[_Canary],
          pids: dict[str, int], rss_pid: int | None, answering: list[tuple[str, int]],
          timeout: float, max_rss_growth_kb: int) -> FuzzReport:
    """The rounds at ``host:port`` (each on one of ``topics``), with the
    ``canaries`` working; then the verdict: every process of ``pids``
    alive, ``rss_pid``'s memory bounded, every address of ``answering``
    answering a fresh client."""
    rng = random.Random(seed)
    report = FuzzReport()
    conversations = [conversation(topic) for topic in topics]
    for canary in canaries:
        canary.start()
    if rss_pid is not None:
        report.rss_before_kb = rss_kb(rss_pid)
    for _ in range(rounds):
        _round(host, port, rng.choice(conversations), rng, timeout)
        report.rounds += 1
    for canary in canaries:
        canary.stop_event.set()
    for canary in canaries:
        canary.join(60)
        report.canary_sent += len(canary.sent)
        report.canary_received += len(canary.received)
        who = "the canary" if len(canaries) == 1 else f"the canary {canary.name_}"
        if canary.is_alive():
            report.problems.append(f"{who} was still running 60 s after the rounds")
        elif canary.error is not None:
            report.problems.append(f"{who} client failed: {canary.error!r}")
        elif not canary.sent:
            report.problems.append(f"{who} sent nothing")
        elif set(canary.sent) - canary.received:
            report.problems.append(f"{who} missed {len(set(canary.sent) - canary.received)} of its messages")
    for name, pid in pids.items():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            report.problems.append(f"the {name} process died")
    if rss_pid is not None:
        report.rss_after_kb = rss_kb(rss_pid)
        if report.rss_after_kb - report.rss_before_kb > max_rss_growth_kb:
            report.problems.append(f"the broker's memory grew by {report.rss_after_kb - report.rss_before_kb} kB")
    for h, p in answering:
        if not _answers(h, p):
            report.problems.append(f"the broker at {h}:{p} no longer answers a fresh client")
    return report


def _owners(service_url: str, topics: list[str]) -> list[str]:
    """The service URL of each topic's owner (a LOOKUP through
    ``service_url``, which gives a bundle an owner if it has none)."""
    from magnetar.client import Client

    client = Client(service_url, operation_timeout_seconds=15)
    try:
        return [client._loop.run(client.aio.lookup(topic)) for topic in topics]
    finally:
        client.close()


def fuzz_cluster(brokers: list[tuple[str, int, int]], target: int, rounds: int, seed: int,
                 timeout: float = 0.3, max_rss_growth_kb: int = 200_000, topics: int = 8) -> FuzzReport:
    """Fuzz broker ``target`` of ``brokers`` (``(host, port, pid)`` each, a
    running cluster) for ``rounds`` rounds; see the module docstring. Of
    the ``topics`` fuzzed topics, half are owned by the fuzzed broker and
    half by others where the names tried allow (bundles are hashed ranges of
    the name). A canary topic that cannot be placed on its broker (64 names
    all owned elsewhere) is a problem in the report, and nothing is fuzzed."""
    urls = [f"pulsar://{h}:{p}" for h, p, _ in brokers]
    host, port, pid = brokers[target]
    other = (target + 1) % len(brokers)
    candidates = [f"persistent://public/default/fuzz-{seed}-{n}" for n in range(4 * topics)]
    owners = _owners(urls[target], candidates)
    mine = [t for t, o in zip(candidates, owners) if o == urls[target]][:topics // 2]
    theirs = [t for t, o in zip(candidates, owners) if o != urls[target]][:topics - len(mine)]
    canaries = []
    for who, k in (("on the fuzzed broker", target), ("on another broker", other)):
        names = [f"persistent://public/default/fuzz-canary-{seed}-{k}-{n}" for n in range(64)]
        placed = [t for t, o in zip(names, _owners(urls[k], names)) if o == urls[k]]
        if not placed:
            report = FuzzReport()
            report.problems.append(f"none of 64 topics is owned by broker {k}: no canary {who}")
            return report
        canaries.append(_Canary(urls[k], placed[0], who))
    report = _fuzz(host, port, rounds, seed, mine + theirs, canaries,
                   {f"broker-{k}": p for k, (_, _, p) in enumerate(brokers)}, pid,
                   [(h, p) for h, p, _ in brokers], timeout, max_rss_growth_kb)
    report.owned_by_target, report.topics = len(mine), len(mine) + len(theirs)
    return report


def _answers(host: str, port: int) -> bool:
    from magnetar.client import Client

    try:
        client = Client(f"pulsar://{host}:{port}", operation_timeout_seconds=10)
        try:
            client.get_topic_partitions("persistent://public/default/fuzz-after")
            return True
        finally:
            client.close()
    except Exception:
        return False
