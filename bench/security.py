"""What TLS and token authentication cost: produce throughput and connection set-up.

    .venv/bin/python -m bench.security [--seconds 5] [--connections 50]

Starts one standalone broker with TLS (a test CA made on the spot) and token
authentication, anonymous clients allowed on the plain listener's role, and
measures with the official client, for plain, plain + token, TLS and TLS +
token: messages per second of one producer (100-byte messages, batching on,
``--seconds`` long) and the median and p99 time to connect and create a
producer (``--connections`` fresh clients). A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pulsar

from magnetar.security.tokens import create_token
from magnetar_harness.broker import configured_broker
from magnetar_harness.pki import make_pki

PAYLOAD = b"x" * 100


def _client(url: str, pki, token: str | None) -> pulsar.Client:
    options = {"operation_timeout_seconds": 30}
    if url.startswith("pulsar+ssl"):
        options["tls_trust_certs_file_path"] = str(pki.ca)
    if token:
        options["authentication"] = pulsar.AuthenticationToken(token)
    return pulsar.Client(url, **options)


def throughput(url: str, pki, token: str | None, seconds: float, topic: str) -> float:
    client = _client(url, pki, token)
    try:
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1,
                                          block_if_queue_full=True, max_pending_messages=10000)
        sent = 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            for _ in range(1000):
                producer.send_async(PAYLOAD, None)
            sent += 1000
        producer.flush()
        return sent / (time.monotonic() - start)
    finally:
        client.close()


def setup_times(url: str, pki, token: str | None, count: int, topic: str) -> list[float]:
    times = []
    for _ in range(count):
        start = time.monotonic()
        client = _client(url, pki, token)
        client.create_producer(topic)
        times.append(time.monotonic() - start)
        client.close()
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        pki = make_pki(tmp_path / "pki")
        secret = os.urandom(32)
        (tmp_path / "secret.key").write_bytes(secret)
        token = create_token("bench", secret_key=secret)
        broker = configured_broker(tmp_path, f"""
tls_port = 0
admin_tls_port = -1
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
authentication_enabled = true
authentication_providers = ["token"]
token_secret_key = "file://{tmp_path / 'secret.key'}"
anonymous_user_role = "anonymous"
""").start()
        try:
            plain, secure = broker.service_url, f"pulsar+ssl://localhost:{broker.tls_port}"
            print(f"{'transport':<10} {'credential':<11} {'msg/s':>10} {'setup p50 ms':>13} {'setup p99 ms':>13}")
            for name, url, tok in (("plain", plain, None), ("plain", plain, token),
                                   ("tls", secure, None), ("tls", secure, token)):
                topic = f"persistent://public/default/bench-{name}-{'token' if tok else 'none'}"
                rate = throughput(url, pki, tok, args.seconds, topic)
                times = setup_times(url, pki, tok, args.connections, topic)
                print(f"{name:<10} {'token' if tok else 'none':<11} {rate:>10,.0f} "
                      f"{statistics.median(times) * 1000:>13.1f} {times[int(0.99 * (len(times) - 1))] * 1000:>13.1f}",
                      flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
