"""The leader's shedder spreads a busy broker's bundles, with traffic, by itself."""
from __future__ import annotations

import threading

import pulsar
import pytest

from magnetar.broker.cluster.bundles import bundle_of, split_namespace

from .cluster_process import LocalCluster, wait_for

pytestmark = pytest.mark.timeout(600)

FAST_SHEDDING = """
load_balancer_report_interval_s = 0.5
load_balancer_shedding_interval_s = 1.0
load_balancer_load_threshold = 0.3
load_balancer_shedding_cycles = 2
load_balancer_broker_cooldown_s = 2.0
"""


def topics_per_bundle(count: int = 2) -> list[str]:
    wanted = {b.range: [] for b in split_namespace("public/default")}
    i = 0
    while any(len(v) < count for v in wanted.values()):
        name = f"persistent://public/default/load-{i}"
        rng = bundle_of(name, "public/default").range
        if len(wanted[rng]) < count:
            wanted[rng].append(name)
        i += 1
    return [t for names in wanted.values() for t in names]


def test_all_bundles_on_one_broker_under_traffic_are_spread_by_the_shedder(tmp_path):
    cluster = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=5.0, broker_config=FAST_SHEDDING).start()
    topics = topics_per_bundle()
    stop = threading.Event()
    errors: list[BaseException] = []
    try:
        b0 = cluster.members[0]
        for t in topics:  # assign every bundle, then gather them all on broker 0
            cluster.admin(b0, "/lookup/v2/topic/" + t.replace("persistent://", "persistent/"))
        for rng, owner in cluster.owners().items():
            if owner != b0.broker_id:
                cluster.admin(b0, f"/admin/v2/namespaces/public/default/{rng}/unload?destinationBroker={b0.broker_id}",
                              "PUT")
        assert set(cluster.owners().values()) == {b0.broker_id}
        client = pulsar.Client(b0.service_url, operation_timeout_seconds=30)
        producers = [client.create_producer(t, batching_enabled=False) for t in topics]

        def produce():
            try:
                while not stop.is_set():
                    for p in producers:
                        p.send_async(b"x" * 100, None)
                    producers[-1].flush()
            except Exception as exc:  # noqa: BLE001  (asserted below)
                errors.append(exc)

        worker = threading.Thread(target=produce)
        worker.start()
        owners = wait_for(lambda: (lambda o: o if len(set(o.values()) - {None}) >= 2 else None)(cluster.owners()), 60,
                          what="the shedder moving bundles off the busy broker")
        print("bundles after shedding:", owners)
        stop.set()
        worker.join(60)
        assert not errors, errors
        report = cluster.admin(b0, "/admin/v2/broker-stats/load-report")
        assert any(entry["load"].get("msg_rate_in", 0) > 0 for entry in report.values())
        client.close()
    finally:
        stop.set()
        cluster.stop()
