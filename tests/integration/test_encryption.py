"""End-to-end encryption: the broker stores and delivers encrypted messages
untouched; consumers with the key decrypt, the others apply their crypto
failure action."""
from __future__ import annotations

import pulsar
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _key_files(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = tmp_path / "private.pem"
    public = tmp_path / "public.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return str(public), str(private)


def test_encrypted_messages_pass_through_and_decrypt_only_with_the_key(tmp_path, broker, pulsar_client):
    public, private = _key_files(tmp_path)
    reader = pulsar.CryptoKeyReader(public, private)
    topic = "persistent://public/default/secret"
    with_key = pulsar_client.subscribe(topic, "with-key", crypto_key_reader=reader,
                                       initial_position=pulsar.InitialPosition.Earliest)
    without_key = pulsar_client.subscribe(topic, "without-key", initial_position=pulsar.InitialPosition.Earliest,
                                          crypto_failure_action=pulsar.ConsumerCryptoFailureAction.CONSUME)
    producer = pulsar_client.create_producer(topic, encryption_key="app-key", crypto_key_reader=reader)
    producer.send(b"the plan")
    assert with_key.receive(timeout_millis=10_000).data() == b"the plan"
    raw = without_key.receive(timeout_millis=10_000).data()
    assert raw != b"the plan" and b"the plan" not in raw  # stored encrypted, delivered as stored
