"""The console's Regions page in a real Chromium against two real regions
(``magnetar geo up``): each replicated topic's replicator towards the other
region (connected, backlog) and its replicated subscriptions, as the
admin API's stats report them."""
from __future__ import annotations

import pulsar
import pytest

from magnetar_harness.regions import LocalRegions, replicated_namespace
from tests.helpers import quiet_logger, wait_for

pytestmark = pytest.mark.timeout(600)


def test_the_regions_page_shows_replication_towards_the_other_region(tmp_path, browser_on):
    regions = LocalRegions(tmp_path / "geo", regions=2).start()
    try:
        replicated_namespace(regions, "acme/payments")
        a, other = regions.regions
        topic = "persistent://acme/payments/transfers"
        client = pulsar.Client(a.service_url, operation_timeout_seconds=60, logger=quiet_logger())
        consumer = client.subscribe(topic, "billing", replicate_subscription_state_enabled=True,
                                    initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for i in range(20):
            producer.send(f"t{i}".encode())
        path = "/admin/v2/persistent/acme/payments/transfers/stats"
        wait_for(lambda: a.admin(path)["replication"].get(other.name, {}).get("connected"), 60,
                 what="the replicator to connect")
        b = browser_on(a.admin_url)
        b.open("#/regions")
        key = f"{topic}→{other.name}"
        b.wait(lambda d: "yes" in b.row("table.replication", key), timeout=30, what="the connected replicator")
        cells = b.cells("table.replication", key)
        assert cells[6] == "billing"  # the replicated subscription
        backlog = a.admin(path)["replication"][other.name]["replicationBacklog"]
        assert cells[3] == str(backlog), (cells, backlog)
        assert a.name in b.text("#clusters") and other.name in b.text("#clusters")
        b.shot("regions")
        producer.close()
        consumer.close()
        client.close()
    finally:
        regions.stop()
