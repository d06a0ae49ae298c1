"""Regions whose brokers require authentication and authorization: the
replicators present the broker's own credential (broker_client_authentication_*)
and the remote lets the replicator role in as a super-user; with
broker_client_tls_enabled they connect over TLS."""
from __future__ import annotations

import os

import pulsar
import pytest

from magnetar import client as mclient
from magnetar.security.tokens import create_token
from tests.helpers import wait_for
from magnetar_harness.pki import make_pki

from magnetar_harness.regions import LocalRegions

pytestmark = pytest.mark.timeout(600)


def _alice_may_use(a, b, namespace: str, admin: str) -> None:
    """Namespace ``namespace`` replicated between regions ``a`` and ``b``,
    where "alice" may produce and consume (``admin``: a super-user's token)."""
    names = [a.name, b.name]
    a.admin("/admin/v2/tenants/acme", "PUT", {"allowedClusters": names}, token=admin)
    a.admin(f"/admin/v2/namespaces/{namespace}", "PUT", {"replication_clusters": names}, token=admin)
    a.admin(f"/admin/v2/namespaces/{namespace}/permissions/alice", "POST", ["produce", "consume"], token=admin)


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
        _alice_may_use(a, b, "acme/secure", admin)
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


def test_replication_over_tls_with_client_certificates(tmp_path):
    """broker_client_tls_enabled: the replicators reach the other region on
    the brokerServiceUrlTls its broker published, present the "replicator"
    certificate (broker_client_authentication_plugin = "tls"), and trust the
    CA in tls_trust_certs_file. A plain connection could not carry that
    credential, so replication working proves it went over TLS."""
    pki = make_pki(tmp_path / "pki", clients=("alice", "replicator"))
    secret = os.urandom(32)
    key = tmp_path / "secret.key"
    key.write_bytes(secret)
    cert, cert_key = pki.clients["replicator"]
    config = f"""
tls_port = 0
admin_tls_port = -1
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
tls_trust_certs_file = "{pki.ca}"
authentication_enabled = true
authentication_providers = ["tls", "token"]
token_secret_key = "file://{key}"
authorization_enabled = true
super_user_roles = ["admin", "replicator"]
broker_client_tls_enabled = true
broker_client_authentication_plugin = "tls"
broker_client_authentication_parameters = "tlsCertFile:{cert},tlsKeyFile:{cert_key}"
"""
    regions = LocalRegions(tmp_path / "geo", regions=2, broker_config=config).start()
    try:
        a, b = regions.regions
        admin = create_token("admin", secret_key=secret)
        _alice_may_use(a, b, "acme/tls", admin)
        # Each region's broker published its pulsar+ssl URL in the cluster record.
        tls_urls = [a.admin(f"/admin/v2/clusters/{r.name}", token=admin)["brokerServiceUrlTls"] for r in (a, b)]
        assert all(url.startswith("pulsar+ssl://") for url in tls_urls), tls_urls
        alice_cert, alice_key = (str(p) for p in pki.clients["alice"])
        # Our client writes in region a, the official client reads in region b, both over TLS as alice.
        writer = mclient.Client(tls_urls[0], operation_timeout_seconds=30, tls_trust_certs_file_path=str(pki.ca),
                                authentication=mclient.AuthenticationTLS(alice_cert, alice_key))
        reader = pulsar.Client(tls_urls[1], tls_trust_certs_file_path=str(pki.ca),
                               authentication=pulsar.AuthenticationTLS(alice_cert, alice_key))
        try:
            consumer = reader.subscribe("persistent://acme/tls/t", "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = writer.create_producer("persistent://acme/tls/t")
            for i in range(30):
                producer.send(f"m{i}".encode())
            got = [consumer.receive(30_000).data().decode() for _ in range(30)]
            assert got == [f"m{i}" for i in range(30)]
            stats = a.admin("/admin/v2/persistent/acme/tls/t/stats", token=admin)
            assert stats["replication"][b.name]["connected"] is True
        finally:
            writer.close()
            reader.close()
    finally:
        regions.stop()


def test_replicators_on_tls_never_fall_back_to_plain_text(tmp_path):
    """broker_client_tls_enabled, but the remote's brokers have no TLS
    listener (no brokerServiceUrlTls in its record): nothing is replicated,
    and the replicator says why, rather than sending in plain text."""
    regions = LocalRegions(tmp_path / "geo", regions=2, broker_config="broker_client_tls_enabled = true\n").start()
    try:
        a, b = regions.regions
        names = [a.name, b.name]
        a.admin("/admin/v2/tenants/acme", "PUT", {"allowedClusters": names})
        a.admin("/admin/v2/namespaces/acme/plain", "PUT", {"replication_clusters": names})
        client = pulsar.Client(a.service_url)
        try:
            client.create_producer("persistent://acme/plain/t").send(b"stays home")
        finally:
            client.close()
        log = tmp_path / "geo" / a.name / "broker-0.log"
        wait_for(lambda: log.exists() and "has no brokerServiceUrlTls" in log.read_text(errors="replace"),
                 timeout=30, what="the replicator to report the missing TLS URL")
        stats = a.admin("/admin/v2/persistent/acme/plain/t/stats")
        assert stats["replication"][b.name]["connected"] is False
    finally:
        regions.stop()
