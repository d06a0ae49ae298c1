"""Regions that go down and come back: the replicator's cursor waits for a
remote that is down (30 s, taking traffic meanwhile) and catches up when it
returns; a source that restarts
having lost its progress re-sends, and the remote (killed -9 meanwhile,
so its deduplication is rebuilt from its log) stores nothing twice."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
from urllib.parse import quote

import pulsar
import pytest

from magnetar.metadata import open_store
from magnetar.metadata.etcd_server import EtcdServer
from tests.helpers import wait_for
from magnetar_harness.cluster import LocalCluster

pytestmark = pytest.mark.timeout(600)
TOPIC = "persistent://acme/ledger/entries"
STATS = "/admin/v2/persistent/acme/ledger/entries/stats"
TOTAL = 3300  # 300 before the outage, 3,000 during it
DOWN_S = 30.0  # how long west stays down while east takes traffic


def _region(tmp_path, etcd, name: str) -> LocalCluster:
    return LocalCluster(tmp_path / name, brokers=1, session_ttl=3.0, etcd=f"{etcd.client_url}/{name}",
                        name=name, configuration_store=f"{etcd.client_url}/global").start()


def _count(region: LocalCluster) -> int:
    """Messages stored in the region's topic (its next offset)."""
    try:
        return region.admin(region.members[0], STATS.replace("/stats", "/internalStats"))["nextOffset"]
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 503):  # not there yet, or its bundle still held by a dead session
            return -1
        raise


def _stats(region: LocalCluster) -> dict:
    return region.admin(region.members[0], STATS)


async def _rewind_replicator_cursor(etcd: EtcdServer, region: str, remote: str, first_ledger: int) -> None:
    """What a crash before the cursor was persisted leaves, at worst: the
    replicator cursor back before the topic's first entry."""
    store = await open_store(etcd.store_url(region))
    try:
        key = f"/managed-ledgers/acme/ledger/persistent/entries/cursors/{quote('pulsar.repl.' + remote, safe='')}"
        record = await store.get(key)
        assert record is not None, f"no replicator cursor at {key}"
        doc = json.loads(record.value)
        doc["mark_delete"] = [first_ledger, -1]
        doc["individually_deleted"] = []
        await store.put(key, json.dumps(doc).encode(), record.version)
    finally:
        await store.close()


def test_a_remote_that_was_down_catches_up_and_a_resend_stores_nothing_twice(tmp_path, etcd):
    east = _region(tmp_path, etcd, "east")
    west = _region(tmp_path, etcd, "west")
    try:
        e0 = east.members[0]
        east.admin(e0, "/admin/v2/tenants/acme", "PUT", {"allowedClusters": ["east", "west"]})
        east.admin(e0, "/admin/v2/namespaces/acme/ledger", "PUT", {"replication_clusters": ["east", "west"]})
        client = pulsar.Client(e0.service_url, operation_timeout_seconds=60)
        # A subscription that acks nothing keeps east's entries stored for the resend below;
        # west's "check" keeps what west stores (nothing is retained without a subscription).
        client.subscribe(TOPIC, "keep", initial_position=pulsar.InitialPosition.Earliest)
        west_client = pulsar.Client(west.members[0].service_url)
        west_client.subscribe(TOPIC, "check", initial_position=pulsar.InitialPosition.Earliest)
        west_client.close()
        producer = client.create_producer(TOPIC, batching_enabled=False)
        for i in range(300):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        wait_for(lambda: _count(west) == 300, 60, what="west has the first 300")

        # west dies hard: its deduplication state must come back from its log.
        os.kill(west.members[0].pid, signal.SIGKILL)
        west.stop()
        # The outage: west stays down while east keeps taking traffic for 30 s.
        down_since = time.monotonic()
        for i in range(300, TOTAL):
            producer.send_async(f"m{i}".encode(), None)
            ahead = down_since + (i - 299) * DOWN_S / (TOTAL - 300) - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing the traffic over the outage, not waiting for a condition
        producer.flush()
        assert time.monotonic() - down_since >= DOWN_S
        # At least the new ones (receipts west stored but never sent count too).
        wait_for(lambda: _stats(east)["replication"]["west"]["replicationBacklog"] >= TOTAL - 300, 30,
                 what="east holding the entries west has not confirmed")
        wait_for(lambda: _stats(east)["replication"]["west"]["connected"] is False, 30,
                 what="east's replicator to west shown disconnected")
        client.close()

        # east stops and "loses" its replicator's progress: it will send everything again.
        first_ledger = east.admin(e0, "/admin/v2/persistent/acme/ledger/entries/internalStats")["ledgers"][0]["ledgerId"]
        east.stop()
        asyncio.run(_rewind_replicator_cursor(etcd, "east", "west", first_ledger))
        west = _region(tmp_path, etcd, "west")
        east = _region(tmp_path, etcd, "east")
        # No client touches east's topic: its broker loads it to resume replication.
        wait_for(lambda: _count(west) == TOTAL, 60, what="west caught up with everything")
        # West stores the last batch before east hears the receipts: wait for east's count too.
        wait_for(lambda: _stats(east)["replication"]["west"]["msgOutCounter"] == TOTAL, 30,
                 what="east re-sent everything")  # all re-sent...
        w0 = west.members[0]
        consumer = pulsar.Client(w0.service_url).subscribe(TOPIC, "check",
                                                           initial_position=pulsar.InitialPosition.Earliest)
        got = []
        while len(got) < TOTAL:
            try:
                msg = consumer.receive(30_000)
            except pulsar.Timeout:
                raise AssertionError(f"west delivered {len(got)} of {TOTAL}: {got[:3]}...{got[-3:]}") from None
            got.append(msg.data().decode())
        assert got == [f"m{i}" for i in range(TOTAL)]  # ...and stored once, in order
        with pytest.raises(pulsar.Timeout):
            consumer.receive(2000)  # and nothing after them
        internal = west.admin(w0, "/admin/v2/persistent/acme/ledger/entries/internalStats")
        assert internal["nextOffset"] == TOTAL
    finally:
        east.stop()
        west.stop()
