"""The leader's shedder spreads a busy broker's bundles, with traffic, by itself."""
from __future__ import annotations

import threading
import time
from collections import Counter

import pulsar
import pytest

from magnetar.broker.cluster.bundles import bundle_of, split_namespace

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

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


def test_all_bundles_on_one_broker_under_traffic_are_spread_by_the_shedder_which_then_stops(tmp_path):
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
        last: dict = {"owners": None, "since": time.monotonic()}

        def settled():
            owners = cluster.owners()
            if owners != last["owners"]:
                last.update(owners=owners, since=time.monotonic())
            if None in owners.values():
                return None  # a bundle is moving right now
            counts = sorted(Counter(owners.values()).values())
            if counts != [1, 1, 2]:
                return None
            # Held for 3 shedding rounds (1 s each): a move needs 2 rounds in
            # a row, so one decided on the rates just before this spread was
            # reached has been made by then. Seen once in CI: a third move
            # 3 s after the first 2-1-1, the destination's bundle reported at
            # 794 msg/s against 1,278 for each of the source's two (a bundle
            # moved 6 s before; why its rate was lower is not known).
            return owners if time.monotonic() - last["since"] >= 3.0 else None

        def rates() -> dict:
            return {broker: entry["load"].get("bundles") for broker, entry in
                    cluster.admin(b0, "/admin/v2/broker-stats/load-report").items()}

        # Four equally busy bundles on three brokers: the best spread is 2-1-1.
        owners = wait_for(settled, 90, what="the shedder spreading the bundles 2-1-1")
        print("bundles after shedding:", owners)
        # ...and there it stops: over several shedding rounds (1 s each, a
        # move needs 2 in a row, cool-down 2 s), no bundle moves again. A
        # shedder chasing bundles back and forth would not have held 2-1-1
        # for the 3 s above, nor would it here.
        quiet_until = time.monotonic() + 8
        while time.monotonic() < quiet_until:
            now = cluster.owners()
            assert now == owners, f"the shedder kept moving bundles after the spread was even: {now}, rates {rates()}"
            time.sleep(0.5)
        stop.set()
        worker.join(60)
        assert not errors, errors
        report = cluster.admin(b0, "/admin/v2/broker-stats/load-report")
        assert any(entry["load"].get("msg_rate_in", 0) > 0 for entry in report.values())
        client.close()
    finally:
        stop.set()
        cluster.stop()
