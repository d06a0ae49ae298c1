"""``magnetar tls create-test-certs`` makes files a broker serves TLS with,
and prints the settings that use them (docs/security.md's recipe)."""
from __future__ import annotations

import json

import pulsar
from typer.testing import CliRunner

from magnetar.cli import app

from tests.helpers import quiet_logger, stop_broker
from magnetar_harness.broker import configured_broker


def test_the_certificates_serve_pulsar_ssl_and_https_admin(tmp_path):
    certs = tmp_path / "certs"
    made = CliRunner().invoke(app, ["tls", "create-test-certs", "--dir", str(certs), "--client", "admin",
                                    "--client", "alice"])
    assert made.exit_code == 0, made.output
    for name in ("ca", "broker", "admin", "alice"):
        assert (certs / f"{name}.cert.pem").is_file() and (certs / f"{name}.key.pem").stat().st_mode & 0o077 == 0
    assert "admin_tls_port = 8443" in made.stdout
    # The printed settings as a config file, on free ports instead of 6651 and 8443.
    config = made.stdout.replace("= 6651", "= 0").replace("= 8443", "= 0")
    broker = configured_broker(tmp_path, config).start()
    try:
        assert broker.tls_port > 0 and broker.admin_tls_port > 0
        client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", logger=quiet_logger(),
                               tls_trust_certs_file_path=str(certs / "ca.cert.pem"), tls_validate_hostname=True)
        try:
            client.create_producer("tls-certs").send(b"over tls")
        finally:
            client.close()
        listed = CliRunner().invoke(app, ["admin", "--url", f"https://localhost:{broker.admin_tls_port}", "--json",
                                          "--tls-trust-certs-file", str(certs / "ca.cert.pem"),
                                          "--tls-cert-file", str(certs / "admin.cert.pem"),
                                          "--tls-key-file", str(certs / "admin.key.pem"), "tenants", "list"])
        assert listed.exit_code == 0 and "public" in json.loads(listed.stdout), listed.output
    finally:
        stop_broker(broker)
    again = CliRunner().invoke(app, ["tls", "create-test-certs", "--dir", str(certs)])
    assert again.exit_code == 1 and "exists" in again.stderr  # a working CA is never replaced
