"""The admin API behind authentication and authorization (Pulsar's model),
over http with tokens and over https with client certificates; and the
admin CLI's credential options."""
from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from magnetar.security.tokens import create_token
from magnetar_harness.pki import make_pki

from magnetar_harness.secured import certificate_secured_broker, token_secured_broker


def _call(url: str, method: str = "GET", body=None, token: str | None = None, context=None,
          basic: str | None = None) -> tuple[int, object]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if basic:
        headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw and raw[:1] in b"[{" else raw.decode())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, (json.loads(raw) if raw[:1] == b"{" else raw.decode())


@pytest.fixture
def secured(tmp_path):
    broker, secret = token_secured_broker(tmp_path)
    yield broker, lambda role: create_token(role, secret_key=secret)
    broker.stop()


def test_credentials_and_roles_decide_what_the_admin_api_does(secured):
    broker, token = secured
    api = broker.admin_url + "/admin/v2"
    # No credential, a forged one: 401, and nothing happens.
    status, body = _call(f"{api}/tenants")
    assert status == 401 and "authentication is required" in body["reason"]
    assert _call(f"{api}/tenants", token="not-a-jwt")[0] == 401
    assert _call(f"{api}/tenants/acme", "PUT", {"adminRoles": ["alice"]}, token=token("alice"))[0] == 403
    # Monitoring stays open.
    assert _call(broker.admin_url + "/admin/v2/brokers/health")[0] == 200
    assert _call(broker.admin_url + "/metrics")[0] == 200
    # A super-user manages tenants; the tenant's admin manages its namespaces, not other tenants'.
    assert _call(f"{api}/tenants/acme", "PUT", {"adminRoles": ["alice"]}, token=token("admin"))[0] == 204
    assert _call(f"{api}/tenants", token=token("admin"))[1] == ["acme", "public"]
    assert _call(f"{api}/tenants", token=token("alice"))[0] == 403
    assert _call(f"{api}/namespaces/acme/orders", "PUT", token=token("alice"))[0] == 204
    assert _call(f"{api}/namespaces/acme/orders/permissions/bob", "POST", ["consume"], token=token("alice"))[0] == 204
    assert _call(f"{api}/namespaces/public/default/retention", "POST",
                 {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1}, token=token("alice"))[0] == 403
    assert _call(f"{api}/tenants/acme", "DELETE", token=token("alice"))[0] == 403
    # A consumer may read a topic's stats, not delete it.
    assert _call(f"{api}/persistent/acme/orders/t", "PUT", token=token("alice"))[0] == 204
    assert _call(f"{api}/persistent/acme/orders/t/stats", token=token("bob"))[0] == 200
    assert _call(f"{api}/persistent/acme/orders/t", "DELETE", token=token("bob"))[0] == 403
    assert _call(f"{api}/persistent/acme/orders/t/stats", token=token("carol"))[0] == 403
    lookup = broker.admin_url + "/lookup/v2/topic/persistent/acme/orders/t"
    assert _call(lookup, token=token("bob"))[0] == 200 and _call(lookup, token=token("carol"))[0] == 403
    assert _call(f"{api}/persistent/acme/orders/t", "GET", token=token("alice"))[0] in (200, 404, 405)


def test_the_admin_cli_sends_its_token(secured):
    broker, token = secured
    base = [sys.executable, "-m", "magnetar.cli", "admin", "--url", broker.admin_url]
    refused = subprocess.run(base + ["tenants", "list"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "401" in refused.stderr
    ok = subprocess.run(base + ["--auth-token", token("admin"), "--json", "tenants", "list"],
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0 and json.loads(ok.stdout) == ["public"]
    env = dict(os.environ, MAGNETAR_AUTH_TOKEN=token("admin"))
    assert subprocess.run(base + ["tenants", "list"], capture_output=True, text=True, timeout=60,
                          env=env).returncode == 0
    granted = subprocess.run(base + ["--auth-token", token("admin"), "namespaces", "grant-permission",
                                     "public/default", "--role", "alice", "--actions", "produce,consume"],
                             capture_output=True, text=True, timeout=60)
    assert granted.returncode == 0, granted.stderr
    shown = subprocess.run(base + ["--auth-token", token("admin"), "--json", "namespaces", "permissions",
                                   "public/default"], capture_output=True, text=True, timeout=60)
    assert json.loads(shown.stdout) == {"alice": ["consume", "produce"]}
    topic_grant = subprocess.run(base + ["--auth-token", token("admin"), "topics", "grant-permission",
                                         "persistent://public/default/t", "--role", "carol", "--actions", "consume"],
                                 capture_output=True, text=True, timeout=60)
    assert topic_grant.returncode == 0, topic_grant.stderr
    topic_shown = subprocess.run(base + ["--auth-token", token("admin"), "--json", "topics", "permissions",
                                         "persistent://public/default/t"], capture_output=True, text=True, timeout=60)
    assert json.loads(topic_shown.stdout) == {"alice": ["consume", "produce"], "carol": ["consume"]}
    denied = subprocess.run(base + ["--auth-token", token("alice"), "namespaces", "revoke-permission",
                                    "public/default", "--role", "alice"], capture_output=True, text=True, timeout=60)
    assert denied.returncode == 1 and "403" in denied.stderr


@pytest.fixture
def https_broker(tmp_path):
    pki = make_pki(tmp_path / "pki")
    broker = certificate_secured_broker(tmp_path, pki)
    assert broker.admin_tls_port > 0
    yield broker, pki
    broker.stop()


def _context(pki, who: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if who is not None:
        cert, key = pki.clients[who] if who in pki.clients else pki.stranger
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def test_https_admin_takes_the_client_certificate_as_the_role(https_broker):
    broker, pki = https_broker
    url = f"https://localhost:{broker.admin_tls_port}/admin/v2/tenants"
    assert _call(url, context=_context(pki, "admin")) == (200, ["public"])
    assert _call(url, context=_context(pki, "alice"))[0] == 403
    assert _call(url, context=_context(pki, None))[0] == 401  # no certificate: no role
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # another CA's certificate: refused in the handshake
        _call(url, context=_context(pki, "stranger"))
    # The admin CLI over https with a client certificate.
    admin_cert, admin_key = pki.clients["admin"]
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "admin", "--url",
                           f"https://localhost:{broker.admin_tls_port}", "--tls-trust-certs-file", str(pki.ca),
                           "--tls-cert-file", str(admin_cert), "--tls-key-file", str(admin_key), "--json",
                           "tenants", "list"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["public"]


def test_the_official_client_authenticates_with_its_certificate(https_broker):
    """AuthenticationTLS on pulsar+ssl: the certificate's CN is the role."""
    import pulsar

    broker, pki = https_broker
    cert, key = pki.clients["admin"]
    client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.ca),
                           authentication=pulsar.AuthenticationTLS(str(cert), str(key)),
                           operation_timeout_seconds=10)
    try:
        client.create_producer("persistent://public/default/by-cert").send(b"signed")
    finally:
        client.close()
    cert, key = pki.clients["alice"]  # a trusted certificate whose role has no permission
    client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.ca),
                           authentication=pulsar.AuthenticationTLS(str(cert), str(key)),
                           operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.AuthorizationError):
            client.create_producer("persistent://public/default/by-cert")
    finally:
        client.close()


def test_the_http_lookup_names_the_tls_urls(https_broker):
    """brokerUrlTls and httpUrlTls, as Pulsar's lookup answers, for a broker with TLS listeners."""
    broker, pki = https_broker
    status, answer = _call(f"https://localhost:{broker.admin_tls_port}/lookup/v2/topic/persistent/public/default/t",
                           context=_context(pki, "admin"))
    assert status == 200, answer
    assert answer["brokerUrl"] == broker.service_url
    assert answer["brokerUrlTls"] == f"pulsar+ssl://127.0.0.1:{broker.tls_port}"
    assert answer["httpUrlTls"] == f"https://127.0.0.1:{broker.admin_tls_port}"
