"""Magnetar's own client over pulsar+ssl, against a real broker: a trusted CA
works, a wrong CA or an unusable file is refused with a clear error, and
AuthenticationTLS makes the certificate's common name the role."""
from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.request

import pytest

from magnetar import client as mclient
from magnetar_harness.pki import make_pki

from magnetar_harness.secured import certificate_secured_broker


@pytest.fixture
def tls_broker(tmp_path):
    """A broker with pulsar+ssl, client certificates as credentials (the tls
    provider) and authorization: "admin" may do anything, nobody else anything
    not granted."""
    pki = make_pki(tmp_path / "pki", hosts=("localhost",))  # not 127.0.0.1: see the host name test
    broker = certificate_secured_broker(tmp_path, pki)
    assert broker.tls_port > 0
    yield broker, pki
    broker.stop()


def _grant(broker, pki, role: str, actions: list[str]) -> None:
    """Grant ``actions`` on public/default to ``role`` as the admin (its certificate, over https)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.load_cert_chain(*(str(p) for p in pki.clients["admin"]))
    req = urllib.request.Request(
        f"https://localhost:{broker.admin_tls_port}/admin/v2/namespaces/public/default/permissions/{role}",
        data=json.dumps(actions).encode(), method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        assert resp.status in (200, 204)


def _client(broker, pki, who: str | None = "admin", **options) -> mclient.Client:
    auth = None
    if who is not None:
        cert, key = pki.clients[who] if who in pki.clients else pki.stranger
        auth = mclient.AuthenticationTLS(str(cert), str(key))
    options.setdefault("tls_trust_certs_file_path", str(pki.ca))
    options.setdefault("operation_timeout_seconds", 10)
    return mclient.Client(f"pulsar+ssl://localhost:{broker.tls_port}", authentication=auth, **options)


def test_our_client_produces_and_consumes_over_tls_with_a_trusted_ca(tls_broker):
    broker, pki = tls_broker
    client = _client(broker, pki, tls_validate_hostname=True)
    try:
        consumer = client.subscribe("persistent://public/default/over-tls", "s")
        producer = client.create_producer("persistent://public/default/over-tls")
        for i in range(20):
            producer.send(f"secret-{i}".encode())
        got = [consumer.receive(timeout_millis=10_000).data() for _ in range(20)]
        assert got == [f"secret-{i}".encode() for i in range(20)]
    finally:
        client.close()


def test_a_wrong_ca_is_refused_with_a_clear_error(tls_broker):
    broker, pki = tls_broker
    client = _client(broker, pki, tls_trust_certs_file_path=str(pki.other_ca), operation_timeout_seconds=2)
    try:
        with pytest.raises((mclient.ConnectError, mclient.Timeout)) as refused:
            client.create_producer("persistent://public/default/refused")
        assert "certificate is not trusted" in str(refused.value)
        assert "tls_trust_certs_file_path" in str(refused.value)
    finally:
        client.close()
    # tls_allow_insecure_connection: any certificate will do (still encrypted).
    insecure = _client(broker, pki, tls_trust_certs_file_path=str(pki.other_ca), tls_allow_insecure_connection=True)
    try:
        insecure.create_producer("persistent://public/default/insecure").send(b"unverified broker")
    finally:
        insecure.close()


def test_hostname_validation_is_off_by_default_like_the_official_client(tls_broker):
    """The broker's certificate names localhost, not 127.0.0.1: accepted
    unless tls_validate_hostname=True."""
    broker, pki = tls_broker
    cert, key = pki.clients["admin"]
    auth = mclient.AuthenticationTLS(str(cert), str(key))
    url = f"pulsar+ssl://127.0.0.1:{broker.tls_port}"
    lax = mclient.Client(url, operation_timeout_seconds=10, authentication=auth,
                         tls_trust_certs_file_path=str(pki.ca))
    strict = mclient.Client(url, operation_timeout_seconds=2, authentication=auth,
                            tls_trust_certs_file_path=str(pki.ca), tls_validate_hostname=True)
    try:
        lax.create_producer("persistent://public/default/names").send(b"ok")
        with pytest.raises((mclient.ConnectError, mclient.Timeout)) as refused:
            strict.create_producer("persistent://public/default/names")
        assert "127.0.0.1" in str(refused.value) and "not trusted" in str(refused.value)
    finally:
        lax.close()
        strict.close()


def test_missing_files_are_a_configuration_error_at_once(tls_broker, tmp_path):
    broker, pki = tls_broker
    with pytest.raises(mclient.InvalidConfiguration, match="not found"):
        _client(broker, pki, tls_trust_certs_file_path=str(tmp_path / "no-such-ca.pem"))
    with pytest.raises(mclient.InvalidConfiguration, match="no-such-cert.pem"):
        mclient.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.ca),
                       authentication=mclient.AuthenticationTLS(str(tmp_path / "no-such-cert.pem"),
                                                                str(pki.server_key)))


def test_authentication_tls_makes_the_certificate_cn_the_role(tls_broker):
    broker, pki = tls_broker
    admin = _client(broker, pki, "admin")
    alice = _client(broker, pki, "alice", operation_timeout_seconds=5)
    nobody = _client(broker, pki, None, operation_timeout_seconds=5)
    stranger = _client(broker, pki, "stranger", operation_timeout_seconds=3)  # CN alice, another CA
    try:
        admin.create_producer("persistent://public/default/by-cert").send(b"signed")
        # alice's certificate is trusted, but her role was granted nothing.
        with pytest.raises(mclient.AuthorizationError):
            alice.create_producer("persistent://public/default/by-cert")
        # Without a certificate there is no credential and no anonymous role.
        with pytest.raises((mclient.AuthenticationError, mclient.Timeout)):
            nobody.create_producer("persistent://public/default/by-cert")
        # A certificate the broker does not trust fails the TLS handshake.
        with pytest.raises((mclient.ConnectError, mclient.Timeout)) as untrusted:
            stranger.create_producer("persistent://public/default/by-cert")
        assert "refuse this client's certificate" in str(untrusted.value)
        # A grant to the role named by her certificate's CN lets alice in.
        _grant(broker, pki, "alice", ["produce"])
        alice.create_producer("persistent://public/default/by-cert").send(b"from alice")
    finally:
        for c in (admin, alice, nobody, stranger):
            c.close()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", *args], capture_output=True, text=True, timeout=60)


def test_produce_and_consume_commands_over_tls_with_a_certificate(tls_broker, tmp_path):
    broker, pki = tls_broker
    cert, key = (str(p) for p in pki.clients["admin"])
    tls = ["-u", f"pulsar+ssl://localhost:{broker.tls_port}", "--tls-trust-certs-file", str(pki.ca),
           "--tls-cert-file", cert, "--tls-key-file", key]
    out = _cli("produce", "cli-tls", "-m", "over tls", *tls)
    assert out.returncode == 0, out.stderr
    out = _cli("consume", "cli-tls", "-s", "s", "-n", "1", "--timeout", "10", *tls)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("over tls")
    # Files that cannot be used: exit 2 and the reason, no traceback.
    out = _cli("produce", "cli-tls", "-m", "x", *tls[:2], "--tls-trust-certs-file", str(tmp_path / "none.pem"))
    assert out.returncode == 2 and "not found" in out.stderr and "Traceback" not in out.stderr
    out = _cli("produce", "cli-tls", "-m", "x", *tls[:4], "--tls-cert-file", cert)
    assert out.returncode == 2 and "--tls-key-file" in out.stderr
