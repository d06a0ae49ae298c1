"""Consumers reading at the tail while the topic rolls to new ledgers get
every message. Found by the chaos partition run (docs/reliability.md): a
reader at the tail during a rollover jumped over the appends waiting for the
new ledger; with 50-entry ledgers whole ledgers went missing for Shared,
Failover and Key_Shared alike."""
from __future__ import annotations

import threading

import pulsar
import pytest

from magnetar_harness.broker import configured_broker

TOTAL = 2000


@pytest.mark.parametrize("kind", ["Shared", "Failover", "KeyShared"])
def test_a_consumer_at_the_tail_misses_nothing_across_rollovers(tmp_path, kind):
    broker = configured_broker(tmp_path, "[storage]\nmax_entries_per_ledger = 50\n").start()
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
    try:
        topic = f"persistent://public/default/tail-{kind.lower()}"
        # A small receiver queue: the consumer keeps up with the tail in small steps.
        consumer = client.subscribe(topic, "s", consumer_type=getattr(pulsar.ConsumerType, kind),
                                    receiver_queue_size=10, initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        got: set[str] = set()

        def receive() -> None:
            while len(got) < TOTAL:
                try:
                    msg = consumer.receive(10_000)
                except pulsar.Timeout:
                    return
                got.add(msg.data().decode())
                consumer.acknowledge(msg)

        reader = threading.Thread(target=receive)
        reader.start()
        for i in range(TOTAL):
            producer.send_async(str(i).encode(), lambda result, msg_id: None)
        producer.flush()
        reader.join(60)
        missing = sorted(set(map(str, range(TOTAL))) - got, key=int)
        assert not missing, f"{len(missing)} never delivered, from {missing[:5]}"
    finally:
        client.close()
        broker.stop()
