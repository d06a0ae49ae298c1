"""Storage profiles and the PUT budget (docs/object-storage.md).

- A namespace switches between ``latency`` and ``cost`` while its topic is
  loaded and a producer is connected, through ``magnetar admin namespaces
  set-storage-profile``: the official client's sends take the cost
  interval (5 s here) under ``cost`` and far less under ``latency`` (a real
  broker, real SeaweedFS and etcd).
- The PUT budget bounds a broker's commits per second whatever the load:
  20 ledgers appending as fast as they are acknowledged under ``latency``
  make at most ``rate x seconds + burst`` PUTs, and every append is
  acknowledged (commits grow instead).
"""
from __future__ import annotations

import asyncio
import time

import pulsar
import pytest
from typer.testing import CliRunner

from magnetar.cli import app
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar_harness.cluster import LocalCluster

pytestmark = pytest.mark.timeout(300)
INTERVAL_S = 5.0
FAST_S = 1.5  # a send under latency: a PUT and a transaction, on a loaded machine


def _cli(broker, *args: str) -> str:
    result = CliRunner().invoke(app, ["admin", "--admin-url", broker.admin_url, "namespaces", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _send_seconds(producer) -> float:
    began = time.monotonic()
    producer.send(b"x" * 100)
    return time.monotonic() - began


def _until(producer, ok, what: str, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        took = _send_seconds(producer)
        if ok(took):
            return took
        assert time.monotonic() < deadline, f"{what}: the last send took {took:.2f} s"


def test_a_namespace_switches_profile_while_its_topic_is_loaded(tmp_path):
    config = f"[storage]\nobject_commit_interval_ms = {int(INTERVAL_S * 1000)}\n"  # profile: latency (default)
    cluster = LocalCluster(tmp_path / "c", brokers=1, storage="object", broker_config=config).start()
    try:
        broker = cluster.members[0]
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30)
        producer = client.create_producer("persistent://public/default/switch", batching_enabled=False,
                                          send_timeout_millis=30_000)
        _until(producer, lambda s: s < FAST_S, "latency: a commit at once")
        assert "(not set)" in _cli(broker, "get-storage-profile", "public/default")
        _cli(broker, "set-storage-profile", "public/default", "cost")
        assert "cost" in _cli(broker, "get-storage-profile", "public/default")
        took = _until(producer, lambda s: s >= INTERVAL_S * 0.6, "cost never gathered")
        assert took < INTERVAL_S * 2
        _cli(broker, "set-storage-profile", "public/default", "latency")
        _until(producer, lambda s: s < FAST_S, "latency never came back")
        _cli(broker, "set-storage-profile", "public/default", "cost")
        _until(producer, lambda s: s >= INTERVAL_S * 0.6, "cost never gathered again")
        _cli(broker, "remove-storage-profile", "public/default")  # the broker's default: latency
        _until(producer, lambda s: s < FAST_S, "the broker's default never came back")
        result = CliRunner().invoke(app, ["admin", "--admin-url", broker.admin_url, "namespaces",
                                          "set-storage-profile", "public/default", "fast"])
        assert result.exit_code == 2 and "must be one of latency, cost" in result.output
        client.close()
    finally:
        assert cluster.stop() == 0


async def test_the_put_budget_bounds_puts_whatever_the_load(tmp_path, etcd_store, objects_url):
    rate, seconds = 10.0, 2.0
    cfg = StorageConfig()
    backend = ObjectBackend(etcd_store, open_object_store(objects_url), profile="latency", put_budget_per_s=rate,
                            collect_interval_s=None)
    factory = ManagedLedgerFactory(tmp_path / "unused", etcd_store, cfg, backend=backend)
    ledgers = [await factory.open(f"t/budget-{i}") for i in range(20)]
    committer = backend.committer
    puts = committer.puts
    acked = 0

    async def writer(ml) -> None:
        nonlocal acked
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await ml.append(b"y" * 100)
            acked += 1

    began = time.monotonic()
    await asyncio.gather(*(writer(ml) for ml in ledgers))
    elapsed = time.monotonic() - began
    made = committer.puts - puts
    assert made <= rate * elapsed + backend.committer.budget.burst + 1, f"{made} PUTs in {elapsed:.1f} s"
    assert acked >= 20 * made / 2, "commits grew: many appends per PUT"  # 20 writers share each commit
    await factory.close()
