"""pulsar+ssl with the official client: a trusted CA, a wrong CA, hostname
validation, and garbage on the TLS port."""
from __future__ import annotations

import socket

import pulsar
import pytest

from magnetar_harness.pki import make_pki

from magnetar_harness.broker import configured_broker


@pytest.fixture
def tls_broker(tmp_path):
    pki = make_pki(tmp_path / "pki")
    broker = configured_broker(tmp_path, f"""
tls_port = 0
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
""").start()
    assert broker.tls_port > 0
    yield broker, pki
    broker.stop()


def test_the_official_client_over_tls_with_a_trusted_ca_and_hostname_validation(tls_broker):
    broker, pki = tls_broker
    client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.ca),
                           tls_validate_hostname=True)
    try:
        consumer = client.subscribe("persistent://public/default/over-tls", "s")
        client.create_producer("persistent://public/default/over-tls").send(b"private")
        assert consumer.receive(timeout_millis=10_000).data() == b"private"
    finally:
        client.close()


def test_a_client_that_does_not_trust_the_broker_certificate_is_refused(tls_broker):
    broker, pki = tls_broker
    client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.other_ca),
                           operation_timeout_seconds=3)
    try:
        with pytest.raises((pulsar.ConnectError, pulsar.Timeout)):
            client.create_producer("persistent://public/default/refused")
    finally:
        client.close()


def test_garbage_on_the_tls_port_harms_nobody(tls_broker):
    broker, pki = tls_broker
    with socket.create_connection(("127.0.0.1", broker.tls_port), timeout=5) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05hello-this-is-not-tls" * 10)
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass
    assert broker.alive
    client = pulsar.Client(f"pulsar+ssl://localhost:{broker.tls_port}", tls_trust_certs_file_path=str(pki.ca))
    client.create_producer("persistent://public/default/after-garbage").send(b"fine")
    client.close()
    plain = pulsar.Client(broker.service_url)  # the plain port keeps working beside TLS
    plain.create_producer("persistent://public/default/plain").send(b"fine")
    plain.close()
