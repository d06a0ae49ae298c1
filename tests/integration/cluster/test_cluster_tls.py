"""A cluster of brokers with TLS listeners, reached over pulsar+ssl: a lookup
redirected to another broker names that broker's pulsar+ssl URL
(brokerServiceUrlTls; brokerUrlTls on the HTTP lookup), which TLS clients
follow instead of the plain one."""
from __future__ import annotations

import json
import os
import urllib.request

import pulsar
import pytest

from magnetar import client as mclient
from magnetar.broker.cluster.bundles import bundle_of
from magnetar.security.tokens import create_token
from magnetar_harness.pki import make_pki

from magnetar_harness.cluster import LocalCluster

pytestmark = pytest.mark.timeout(600)


def _admin(cluster, path: str, secret: bytes, method: str = "GET"):
    req = urllib.request.Request(cluster.members[0].admin_url + path, method=method,
                                 headers={"Authorization": f"Bearer {create_token('admin', secret_key=secret)}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def test_tls_clients_follow_lookups_to_the_owners_tls_url(tmp_path):
    # Certificates are the only binary-protocol credential: a client sent to a
    # plain URL could not authenticate, so every message below went over TLS.
    pki = make_pki(tmp_path / "pki")
    secret = os.urandom(32)
    (tmp_path / "secret.key").write_bytes(secret)
    cluster = LocalCluster(tmp_path / "cluster", brokers=2, session_ttl=3.0, broker_config=f"""
tls_port = 0
admin_tls_port = -1
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
tls_trust_certs_file = "{pki.ca}"
authentication_enabled = true
authentication_providers = ["tls", "token"]
token_secret_key = "file://{tmp_path / 'secret.key'}"
authorization_enabled = true
super_user_roles = ["admin"]
""").start()
    try:
        record = _admin(cluster, "/admin/v2/clusters/cluster", secret)
        hosts = record["brokerServiceUrlTls"].removeprefix("pulsar+ssl://").split(",")
        assert len(hosts) == 2, record  # both brokers published their TLS listener
        entry = f"pulsar+ssl://{hosts[0]}"
        cert, key = (str(p) for p in pki.clients["admin"])
        ours = mclient.Client(entry, operation_timeout_seconds=30, tls_trust_certs_file_path=str(pki.ca),
                              authentication=mclient.AuthenticationTLS(cert, key))
        official = pulsar.Client(entry, tls_trust_certs_file_path=str(pki.ca), operation_timeout_seconds=30,
                                 authentication=pulsar.AuthenticationTLS(cert, key))
        try:
            topics = [f"persistent://public/default/tls-{i}" for i in range(12)]
            urls = set()
            for topic in topics:
                consumer = official.subscribe(topic, "s")
                producer = ours.create_producer(topic)
                producer.send(topic.encode())
                urls.add(producer._p.conn.url)
                assert consumer.receive(timeout_millis=30_000).data() == topic.encode()
                producer.close()
                consumer.close()
            # Bundles of both brokers were used: some lookups were redirected,
            # and each ended on the owner's pulsar+ssl URL.
            assert urls == {f"pulsar+ssl://{h}" for h in hosts}, urls
            # The HTTP lookup names the owner's pulsar+ssl URL too (brokerUrlTls).
            looked_up = {_admin(cluster, f"/lookup/v2/topic/{t.replace('://', '/')}", secret)["brokerUrlTls"]
                         for t in topics}
            assert looked_up == urls

            # A bundle moved without lookups (PIP-307): CLOSE_PRODUCER and
            # CLOSE_CONSUMER name the new owner's pulsar+ssl URL too
            # (assignedBrokerServiceUrlTls), so TLS clients follow it at once.
            topic = topics[0]
            consumer = official.subscribe(topic, "moving")
            producer = official.create_producer(topic)
            producer.send(b"before")
            bundle = bundle_of(topic, "public/default").range
            before = cluster.lookups()
            owner = _admin(cluster, "/admin/v2/namespaces/public/default/bundles", secret)["owners"][bundle]
            other = next(m.broker_id for m in cluster.members if m.broker_id != owner)
            _admin(cluster, f"/admin/v2/namespaces/public/default/{bundle}/unload?destinationBroker={other}", secret,
                   "PUT")
            producer.send(b"after")
            assert [consumer.receive(timeout_millis=30_000).data() for _ in range(2)] == [b"before", b"after"]
            assert cluster.lookups() == before, "a TLS client looked the topic up after a move"
        finally:
            ours.close()
            official.close()
    finally:
        assert cluster.stop() == 0, "cluster up did not stop cleanly"
