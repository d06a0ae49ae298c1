"""How many metadata reads loading topics costs (issue 41: a restart, a
bundle taken over or a failover loads thousands of topics at once, and each
read is an etcd request beside the object committer's transactions).

    .venv/bin/python -m bench.load_reads [--topics 2000] [--namespaces 1] [--cursors 1] [--with-own 10]

No broker process and no etcd: a broker service on files in a temporary
directory over a real in-memory store wrapped to count read requests
(``get``, ``children``, and ``children_records``, which etcd answers with
one range per page). ``--topics`` topics spread over ``--namespaces``
namespaces are stored first (each with ``--cursors`` subscriptions, one
entry and its producer's dedup snapshot; ``--with-own`` of them with a
topic-level policy); a new service on the same store and directory then
loads them all at once, as after a restart, and the reads of that burst are
counted by kind.

To count a tree without this script (one before it), run a copy of it
with ``PYTHONPATH=<that tree>``: each counts its own load's code.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
from pathlib import Path

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespaces import resources
from magnetar.broker.server.service import BrokerService
from magnetar.broker.subscriptions import cursor_ops
from magnetar.broker.topic_name import parse
from magnetar.broker.topics.producer import Producer
from magnetar.metadata import MemoryMetadataStore, MetadataStore
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock, checksummed_block
from magnetar.storage import ManagedLedgerFactory
from magnetar_harness.read_tap import ReadTap


def kind(key: str) -> str:
    if key.startswith((resources.POLICIES, resources.TOPIC_POLICIES)):
        return "policies"
    if key.startswith("/managed-ledgers/"):
        return "cursors" if "/cursors" in key else "managed ledger record"
    if key.startswith("/dedup/"):
        return "dedup snapshot"
    return key.split("/")[1] if key.count("/") > 1 else key


def _service(data_dir: str, store: MetadataStore) -> BrokerService:
    config = BrokerConfig(data_dir=data_dir)
    return BrokerService(config, store, ManagedLedgerFactory(Path(data_dir), store, config.storage))


async def _store_one(service: BrokerService, name, cursors: int) -> None:
    topic = await service.get_topic(name)
    for c in range(cursors):
        await cursor_ops.create(topic, f"s{c}", None, earliest=True)
    producer = Producer(producer_id=1, name="p", topic=topic, access_mode=pb.Shared)
    await topic.add_producer(producer, None)
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    block = PayloadBlock(memoryview(checksummed_block(md.SerializeToString(), b"x")))
    await topic.publish(producer, pb.CommandSend(producer_id=0, sequence_id=0, num_messages=1), block)


async def main(topics: int, namespaces: int, cursors: int, with_own: int) -> None:
    store = ReadTap(MemoryMetadataStore())
    data_dir = tempfile.mkdtemp(prefix="load-reads-")
    await resources.bootstrap(store, BrokerConfig(data_dir=data_dir).cluster_name, {})
    spaces = [f"public/ns{k}" for k in range(namespaces)]
    for ns in spaces:
        await resources.create_namespace(store, ns, {"message_ttl_in_seconds": 3600})
    names = [parse(f"persistent://{spaces[i % namespaces]}/t{i}") for i in range(topics)]
    for name in names[:with_own]:
        await resources.set_topic_policy(store, name, "max_producers", 5)
    service = _service(data_dir, store)
    for start in range(0, topics, 256):
        await asyncio.gather(*(_store_one(service, n, cursors) for n in names[start:start + 256]))
    await service.close()
    await service.factory.close()

    service = _service(data_dir, store)
    store.read_keys.clear()
    await asyncio.gather(*(service.get_topic(name) for name in names))
    counts = collections.Counter(kind(key) for key in store.read_keys)
    print(f"{topics} topics in {namespaces} namespace(s), {cursors} cursor(s) each, loaded at once:")
    print(f"  all reads: {len(store.read_keys)} ({len(store.read_keys) / topics:.2f} per topic)")
    for what, count in sorted(counts.items()):
        print(f"  {what}: {count} ({count / topics:.2f} per topic)")
    await service.close()
    await service.factory.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=2_000)
    parser.add_argument("--namespaces", type=int, default=1)
    parser.add_argument("--cursors", type=int, default=1)
    parser.add_argument("--with-own", type=int, default=10, help="topics with a topic-level policy")
    args = parser.parse_args()
    asyncio.run(main(args.topics, args.namespaces, args.cursors, args.with_own))
