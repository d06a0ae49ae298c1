"""Regions whose brokers require authentication and authorization: the
replicators present the broker's own credential (broker_client_authentication_*)
and the remote lets the replicator role in as a super-user."""
from __future__ import annotations

import os

import pulsar
import pytest

from magnetar.security.tokens import create_token

from .regions_process import LocalRegions

pytestmark = pytest.mark.timeout(600)


def test_replication_between_secured_regions(tmp_path):
    secret = os.urandom(32)
    key = tmp_path / "secret.key"
    key.write_bytes(secret)
    config = f"""
authentication_enabled = true
authentication_providers = ["token"]
token_secret_key = "file://{key}"
authorization_enabled = true
super_user_roles = ["admin", "replicator"]
broker_client_authentication_plugin = "token"
broker_client_authentication_parameters = "token:{create_token('replicator', secret_key=secret)}"
"""
    regions = LocalRegions(tmp_path / "geo", regions=2, broker_config=config).start()
    try:
        a, b = regions.regions
        admin = create_token("admin", secret_key=secret)
        names = [a.name, b.name]
        a.admin("/admin/v2/tenants/acme", "PUT", {"allowedClusters": names}, token=admin)
        a.admin("/admin/v2/namespaces/acme/secure", "PUT", {"replication_clusters": names}, token=admin)
        a.admin("/admin/v2/namespaces/acme/secure/permissions/alice", "POST", ["produce", "consume"], token=admin)
        alice = pulsar.AuthenticationToken(create_token("alice", secret_key=secret))
        client_a = pulsar.Client(a.service_url, authentication=alice)
        client_b = pulsar.Client(b.service_url, authentication=alice)
        try:
            consumer = client_b.subscribe("persistent://acme/secure/t", "s",
                                          initial_position=pulsar.InitialPosition.Earliest)
            producer = client_a.create_producer("persistent://acme/secure/t")
            for i in range(50):
                producer.send(f"m{i}".encode())
            got = [consumer.receive(30_000).data().decode() for _ in range(50)]
            assert got == [f"m{i}" for i in range(50)]
            stats = a.admin("/admin/v2/persistent/acme/secure/t/stats", token=admin)
            assert stats["replication"][b.name]["connected"] is True
        finally:
            client_a.close()
            client_b.close()
    finally:
        regions.stop()
