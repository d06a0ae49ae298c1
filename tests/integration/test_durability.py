"""kill -9 in the middle of work: every receipted message survives, in order."""
from __future__ import annotations

import json
import threading
import urllib.request

import pulsar

from tests.helpers import wait_for
from .topic_log import sequence_report

TOTAL = 100_000
PREFIX = 1000


def _internal_stats(broker, topic):
    url = f"{broker.admin_url}/admin/v2/persistent/public/default/{topic}/internalStats"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def test_kill_minus_nine_loses_no_receipted_message(broker):
    topic = "durable"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=5)
    # A subscription that has acknowledged a prefix before the crash.
    consumer = client.subscribe(topic, "sub", initial_position=pulsar.InitialPosition.Earliest)
    first_producer = client.create_producer(topic, producer_name="prefix")
    for i in range(PREFIX):
        first_producer.send_async(f"{i}".encode(), None)
    first_producer.flush()
    msgs = [consumer.receive(timeout_millis=10_000) for _ in range(PREFIX)]
    consumer.acknowledge_cumulative(msgs[-1])
    last_acked = msgs[-1].message_id()
    wait_for(lambda: _internal_stats(broker, topic)["cursors"]["sub"]["markDeletePosition"]
             == f"{last_acked.ledger_id()}:{last_acked.entry_id()}", what="persisted ack")
    first_producer.close()

    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                      batching_max_publish_delay_ms=2, max_pending_messages=5000,
                                      block_if_queue_full=True, send_timeout_millis=5000)
    acked: list[int] = []
    lock = threading.Lock()
    stop = threading.Event()

    def callback(i):
        def _cb(res, _msg_id):
            if res == pulsar.Result.Ok:
                with lock:
                    acked.append(i)
        return _cb

    def produce():
        for i in range(PREFIX, TOTAL):
            if stop.is_set():
                return
            try:
                producer.send_async(f"{i}".encode(), callback(i))
            except Exception:
                return

    sender = threading.Thread(target=produce, daemon=True)
    sender.start()
    wait_for(lambda: len(acked) >= 30_000, timeout=120, what="30000 receipts")
    broker.kill()
    stop.set()
    with lock:
        receipted = set(acked)
    client.close()
    sender.join(30)

    broker.start()
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    stored: list[int] = []
    while reader.has_message_available():
        stored.append(int(reader.read_next(5000).data()))
    missing = receipted - set(stored)
    assert not missing, f"{len(missing)} receipted messages lost, e.g. {sorted(missing)[:10]}"
    # In order: the log is 0, 1, 2, ... (nothing was resent, the client was closed).
    assert not sequence_report(stored, len(stored)), sequence_report(stored, len(stored))

    # The subscription resumes right after what it acknowledged.
    consumer = client.subscribe(topic, "sub")
    first = consumer.receive(timeout_millis=10_000)
    assert int(first.data()) == PREFIX
    client.close()


def test_clean_restart_keeps_messages_and_positions(broker):
    client = pulsar.Client(broker.service_url)
    consumer = client.subscribe("restart", "sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer("restart")
    for i in range(20):
        producer.send(f"m{i}".encode())
    for _ in range(5):
        consumer.acknowledge(consumer.receive(timeout_millis=5000))
    consumer.close()  # flushes acks
    client.close()
    broker.restart()
    client = pulsar.Client(broker.service_url)
    consumer = client.subscribe("restart", "sub")
    assert consumer.receive(timeout_millis=5000).data() == b"m5"
    producer = client.create_producer("restart")
    producer.send(b"after-restart")
    client.close()
