"""A lookup of a bundle stuck in flight (magnetar/broker/cluster/member.py).

Two brokers on an etcd of the test's own. Broker B is paused (SIGSTOP, well
within its session: still live to the cluster) and the channel record of a
topic's bundle is written Assigning to B, as a lookup would: nobody takes
it while B sleeps. Broker A, asked to look the topic up, must answer
ServiceNotReady ("try again") within ``lookup_timeout_s`` (5 s), inside a
client's share of its operation timeout (10 s of 30 s over 3 hosts; with
the old 15 s the client gave up on A before it answered). The official
client retries that answer, and once B resumes and takes the bundle its
producer is created and sends.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from magnetar.broker.cluster.bundles import bundle_of
from magnetar.broker.cluster.channel import ASSIGNING, OWNED, Channel
from magnetar.client.aio import AsyncClient
from magnetar.client.errors import ServiceUnitNotReady
from magnetar.metadata.etcd import EtcdMetadataStore
from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(300)

TOPIC = "persistent://public/default/stuck-in-flight"
SESSION_TTL_S = 30.0  # B stays live to the cluster through its pause


@pytest.fixture
def cluster(tmp_path, etcd):
    c = LocalCluster(tmp_path / "cluster", brokers=2, session_ttl=SESSION_TTL_S,
                     etcd=f"{etcd.client_url}/lk").start()
    yield c
    for m in c.members:  # never leave a stopped process behind
        try:
            os.kill(m.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    c.stop()


#: The official client in a process of its own: its C++ core's logger is
#: process-wide and the first client's wins, so in a test process where an
#: earlier test made a client with a quiet logger this one's lines (the
#: lookup's retries, at INFO) would never be seen. Prints every log line,
#: then ``RESULT sent`` or ``RESULT error ...``.
_OFFICIAL = r"""
import logging, sys
import pulsar

class Lines(logging.Handler):
    def emit(self, record):
        print(record.getMessage(), flush=True)

log = logging.getLogger("official")
log.setLevel(logging.DEBUG)
log.addHandler(Lines())
log.propagate = False
client = pulsar.Client(sys.argv[1], operation_timeout_seconds=30, logger=log)
try:
    producer = client.create_producer(sys.argv[2])
    producer.send(b"after the bundle settled")
    print("RESULT sent", flush=True)
except Exception as exc:
    print(f"RESULT error {exc!r}", flush=True)
client.close()
"""


def _start_official(service_url: str, topic: str) -> tuple[subprocess.Popen, list[str]]:
    """The official client's producer in its own process; its output lines, as they come."""
    proc = subprocess.Popen([sys.executable, "-c", _OFFICIAL, service_url, topic],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    return proc, lines


async def test_a_lookup_of_a_bundle_in_flight_is_answered_in_time_and_the_official_client_retries(cluster, etcd):
    a, b = cluster.members
    store = await EtcdMetadataStore.open(etcd.store_url("lk"))
    channel = Channel(store)
    await channel.start()
    client = AsyncClient(a.service_url, operation_timeout_seconds=30)
    official = None
    try:
        bundle = bundle_of(TOPIC, "public/default")
        os.kill(b.pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        await channel.transition(bundle, ASSIGNING, b.broker_id, expected=channel.get(bundle))

        # Magnetar's client: A answers "try again" within lookup_timeout_s, not after the client's share.
        started = time.monotonic()
        with pytest.raises(ServiceUnitNotReady, match="Failed to acquire ownership") as raised:
            await client.lookup(TOPIC, timeout=10.0)  # a host's share of 30 s over 3 hosts
        answered = time.monotonic() - started
        assert 4.0 <= answered < 8.0, f"A answered after {answered:.1f} s: {raised.value}"
        assert f"Assigning on {b.broker_id}" in str(raised.value)

        # The official client: its lookup gets the same answer and is retried, not failed.
        official, lines = _start_official(a.service_url, TOPIC)
        await asyncio.to_thread(wait_for, lambda: any("Failed lookup" in line for line in lines), 15, 0.1,
                                "the official client's lookup answered ServiceNotReady")
        await asyncio.to_thread(wait_for, lambda: any("Reschedule" in line for line in lines), 15, 0.1,
                                "the official client to reschedule its lookup")
        assert channel.get(bundle).state == ASSIGNING, "the bundle settled while B was paused"
        assert time.monotonic() - paused_at < SESSION_TTL_S - 5  # B was live all along
        os.kill(b.pid, signal.SIGCONT)
        result = await asyncio.to_thread(wait_for, lambda: [x for x in lines if x.startswith("RESULT")], 40, 0.1,
                                         "the official client's producer to be created and send")
        assert result == ["RESULT sent"], "\n".join(lines[-30:])
        assert channel.get(bundle).state == OWNED and channel.get(bundle).broker == b.broker_id
        # A kept the official client's connection until it sent (its close comes after):
        # the text tells it the bundle is moving.
        before = lines[:lines.index("RESULT sent")]
        assert not any("Connection closed" in line or "Connection disconnected" in line for line in before), \
            "\n".join(before)
    finally:
        os.kill(b.pid, signal.SIGCONT)
        if official is not None and official.poll() is None:
            official.kill()
            official.wait()
        await client.close()
        channel.close()
        await store.close()
