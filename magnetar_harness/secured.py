"""Started brokers that want credentials: tokens or client certificates."""
from __future__ import annotations

import os
from pathlib import Path

from .broker import BrokerProcess, configured_broker


def token_secured_broker(directory: Path, authorization: bool = True, extra: str = "") -> tuple[BrokerProcess, bytes]:
    """A started broker that wants tokens signed with a fresh HS256 secret
    (returned), with authorization and "admin" as super-user unless told not."""
    secret = os.urandom(32)
    key = Path(directory) / "secret.key"
    key.write_bytes(secret)
    rules = 'authorization_enabled = true\nsuper_user_roles = ["admin"]\n' if authorization else ""
    broker = configured_broker(directory, f"""
authentication_enabled = true
authentication_providers = ["token"]
token_secret_key = "file://{key}"
{rules}{extra}
""").start()
    return broker, secret


def certificate_secured_broker(directory: Path, pki) -> BrokerProcess:
    """A started broker with pulsar+ssl and https on free ports, client
    certificates as the only credential (the tls provider) and authorization:
    "admin" may do anything, nobody else anything not granted. ``pki``: a
    :func:`~.pki.make_pki` result."""
    return configured_broker(directory, f"""
tls_port = 0
admin_tls_port = 0
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
tls_trust_certs_file = "{pki.ca}"
authentication_enabled = true
authentication_providers = ["tls"]
authorization_enabled = true
super_user_roles = ["admin"]
""").start()
