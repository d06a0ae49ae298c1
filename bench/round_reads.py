"""How many metadata reads the broker's periodic rounds cost at many loaded
topics (issue 41: etcd stays small and quiet beside the object committer).

    .venv/bin/python -m bench.round_reads [--topics 10000] [--namespaces 2] [--with-own 100]

No broker process and no etcd: the rounds' own code over a real in-memory
store wrapped to count read requests (``get``, ``children``, and
``children_records``, which etcd answers with one range per page).
``--topics`` loaded topics spread over ``--namespaces`` namespaces (stand-ins
holding a name, as the rounds read only the policies), ``--with-own`` of them
with a topic-level policy. Counted, each once:

- ``expiry round``: one message-expiry round (``policies/expiry.py``, every
  ``message_expiry_check_interval_s``);
- ``policy change``: the refresh of loaded topics after one namespace's
  policy is set (the service's watch on the policy roots);
- ``replication pass``: geo-replication's pass over the loaded topics
  (``replication/manager.py``, every second with a configuration store);
- ``replication loading pass``: its pass that loads the stored topics of
  replicated namespaces (every 5 s), each topic stored with one cursor.

To count a tree without this script (one before it), run a copy of it
with ``PYTHONPATH=<that tree>``: each counts its own rounds' code.
"""
from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from types import SimpleNamespace

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespaces import resources
from magnetar.broker.policies.expiry import MessageExpiry
from magnetar.broker.server.service import BrokerService
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory
from magnetar_harness.read_tap import ReadTap


def _stand_in(name) -> SimpleNamespace:
    """A loaded topic as far as the rounds look (their actions are not counted)."""
    return SimpleNamespace(name=name, closed=False, subscriptions={}, dedup=SimpleNamespace(enabled=False),
                           ledger=SimpleNamespace(set_retention=lambda policy: None, cursors={}),
                           replicators={"elsewhere": None}, marker_handler=True)  # replicating already


async def _settled(store: ReadTap) -> None:
    """Until the refresh tasks a change started are done (all in this loop: no I/O)."""
    stable, last = 0, -1
    while stable < 200:
        await asyncio.sleep(0)
        stable, last = (stable + 1, last) if store.reads == last else (0, store.reads)


async def main(topics: int, namespaces: int, with_own: int) -> None:
    store = ReadTap(MemoryMetadataStore())
    config = BrokerConfig(data_dir=tempfile.mkdtemp(prefix="round-reads-"))
    await resources.bootstrap(store, config.cluster_name, {})
    names = [f"public/ns{k}" for k in range(namespaces)]
    for ns in names:
        await resources.create_namespace(store, ns, {"message_ttl_in_seconds": 3600,
                                                     "replication_clusters": [config.cluster_name, "elsewhere"]})
    loaded = [parse(f"persistent://{names[i % namespaces]}/t{i}") for i in range(topics)]
    for name in loaded[:with_own]:
        await resources.set_topic_policy(store, name, "message_ttl_in_seconds", 60)
    for name in loaded:  # stored as a managed ledger with one cursor (only what a listing reads)
        key = f"/managed-ledgers/{name.managed_ledger_name}"
        await store.put(key, b'{"ledgers": []}')
        await store.put(f"{key}/cursors/s", b'{"markDelete": null}')
    service = BrokerService(config, store, ManagedLedgerFactory(Path(config.data_dir), store, config.storage))
    service._apply_policies = lambda topic, policies: None  # what the refresh reads is counted, not what it sets
    service.topics.update({str(n): _stand_in(n) for n in loaded})

    store.reads = 0
    await MessageExpiry(service, store, 60.0).check_all()
    print(f"expiry round: {store.reads} reads")

    await _settled(store)
    store.reads = 0
    await resources.set_policy(store, names[0], "max_producers_per_topic", 7)
    before = store.reads  # the set's own read-modify-write
    await _settled(store)
    print(f"policy change: {store.reads - before} reads")

    from magnetar.replication.manager import GeoReplication

    geo = GeoReplication(service, config)
    store.reads = 0
    if hasattr(geo, "_reconcile_all"):
        await geo._reconcile_all()
    else:
        for topic in list(service.topics.values()):
            await geo._reconcile(topic)
    print(f"replication pass: {store.reads} reads")
    store.reads = 0
    await geo._resume()
    print(f"replication loading pass: {store.reads} reads")
    await geo.clusters.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=2)
    parser.add_argument("--with-own", type=int, default=100, help="topics with a topic-level policy")
    args = parser.parse_args()
    asyncio.run(main(args.topics, args.namespaces, args.with_own))
