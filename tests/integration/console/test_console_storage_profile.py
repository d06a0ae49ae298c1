"""A namespace's storage profile in the console, in a real Chromium against
one real broker on object storage (etcd, SeaweedFS): the operator switches
it in the policies dialog while a topic of the namespace is loaded and a
producer connected; the admin API reports the new profile, the loaded
topic commits as it says (under ``cost`` the official client's sends take
the commit interval, under ``latency`` far less), and a refused switch is
one clear sentence in the page."""
from __future__ import annotations

import time

import pulsar
import pytest

from magnetar_harness.cluster import LocalCluster
from tests.helpers import quiet_logger
from tests.integration.admin_support import ok

pytestmark = pytest.mark.timeout(300)
INTERVAL_S = 4.0  # the cost profile's commit interval
FAST_S = 1.5  # a send under latency: a PUT and a transaction, on a loaded machine


def _send_seconds(producer) -> float:
    began = time.monotonic()
    producer.send(b"x" * 100)
    return time.monotonic() - began


def _until(producer, wanted, what: str, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while True:
        took = _send_seconds(producer)
        if wanted(took):
            return took
        assert time.monotonic() < deadline, f"{what}: the last send took {took:.2f} s"


def _switch(b, namespace: str, profile: str, listed: str) -> None:
    """Open the namespace's policies, choose ``profile``, check the change listed, apply."""
    b.click(f"table.namespaces tr[data-row='{namespace}'] button[data-action='policies']")
    b.wait_text("#confirm-dialog", "Storage profile")
    b.select("#field-storageProfile", profile)
    b.click("#dialog-confirm")
    b.wait_text("#policy-changes", listed)
    b.confirm()


def test_a_namespace_switches_storage_profile_in_the_console_while_its_topic_is_loaded(tmp_path, browser_on):
    config = f"[storage]\nobject_commit_interval_ms = {int(INTERVAL_S * 1000)}\n"  # the broker's profile: latency
    cluster = LocalCluster(tmp_path / "c", brokers=1, storage="object", broker_config=config).start()
    try:
        broker = cluster.members[0]
        client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
        producer = client.create_producer("persistent://public/default/profiled", batching_enabled=False,
                                          send_timeout_millis=30_000)
        _until(producer, lambda s: s < FAST_S, "latency: a commit at once")
        b = browser_on(broker.admin_url)
        b.open("#/tenants")
        b.wait_text("#tenant-list", "public/default")
        b.click("table.namespaces tr[data-row='public/default'] button[data-action='policies']")
        # The choice not made names the broker's own profile.
        b.wait_text("#confirm-dialog", "broker default (latency)")
        b.click("#dialog-cancel")
        b.wait(lambda d: not b.css("#confirm-dialog"), what="the dialog to close")

        _switch(b, "public/default", "cost", "storage profile: broker default → cost")
        assert "saved" in b.toast()
        assert ok(broker, "GET", "namespaces/public/default/storageProfile") == "cost"
        b.wait(lambda d: "cost" in b.row("table.namespaces", "public/default"), what="the profile as a field")
        took = _until(producer, lambda s: s >= INTERVAL_S * 0.6, "the loaded topic never gathered under cost")
        assert took < INTERVAL_S * 2
        b.shot("storage-profile")

        _switch(b, "public/default", "latency", "storage profile: cost → latency")
        assert "saved" in b.toast()
        assert ok(broker, "GET", "namespaces/public/default/storageProfile") == "latency"
        _until(producer, lambda s: s < FAST_S, "the loaded topic never came back to latency")

        # A refused switch: the namespace is deleted while its dialog is open.
        ok(broker, "PUT", "namespaces/public/short-lived")
        b.wait_text("#tenant-list", "public/short-lived")
        b.click("table.namespaces tr[data-row='public/short-lived'] button[data-action='policies']")
        b.wait_text("#confirm-dialog", "Storage profile")
        b.select("#field-storageProfile", "cost")
        b.click("#dialog-confirm")
        b.wait_text("#policy-changes", "storage profile: broker default → cost")
        ok(broker, "DELETE", "namespaces/public/short-lived")
        b.confirm()
        error = b.toast()
        assert "Refused by the broker (storage profile)" in error and "short-lived" in error, error
        assert ok(broker, "GET", "namespaces/public/default/storageProfile") == "latency"
        client.close()
    finally:
        assert cluster.stop() == 0
