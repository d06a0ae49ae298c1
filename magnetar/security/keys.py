"""Key material for tokens: reading it from settings and making new keys.

A key setting (``token_secret_key``, ``token_public_key``, the CLI's
``--secret-key`` / ``--private-key``) is given the way Pulsar takes it:

- ``file:///path/to/key`` or ``file:relative/path``: the file's bytes;
- ``data:;base64,<base64>`` (or ``data:<mime>;base64,...``): inline bytes;
- anything else: a path if such a file exists, else base64 text.

Secret keys are raw bytes (Pulsar writes 32 random bytes). Public and private
keys may be DER (what ``magnetar tokens create-key-pair`` writes, as Pulsar
does: X.509 SubjectPublicKeyInfo and PKCS#8) or PEM.

Failure modes: :class:`KeyError_` with a message naming the setting when the
file is missing, the base64 is malformed or the bytes are not a key.
"""
from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path
from urllib.parse import unquote, urlparse

# cryptography is imported by the functions that use it: reading a key
# setting's bytes (read_key_bytes) does not need it.


class KeyError_(ValueError):
    """A key setting cannot be read or does not hold a usable key."""


def read_key_bytes(value: str, what: str = "key") -> bytes:
    """The bytes a ``file:`` / ``data:`` / path / base64 key setting names."""
    if not isinstance(value, str) or not value.strip():
        raise KeyError_(f"{what} is empty")
    value = value.strip()
    if value.startswith("file://"):
        parsed = urlparse(value)
        if parsed.netloc not in ("", "localhost"):
            raise KeyError_(f"{what}: file URL {value!r} names a remote host")
        return _read_file(Path(unquote(parsed.path)), what)
    if value.startswith("file:"):
        return _read_file(Path(value[len("file:"):]), what)  # file:relative/path
    if value.startswith("data:"):
        header, sep, payload = value[len("data:"):].partition(",")
        if not sep:
            raise KeyError_(f"{what}: data URL without a comma")
        if header.endswith(";base64"):
            return _b64(payload, what)
        return unquote(payload).encode()
    if os.path.exists(value):
        return _read_file(Path(value), what)
    try:
        return _b64(value, what)
    except KeyError_:
        raise KeyError_(f"{what}: {value!r} is neither an existing file, a file:/data: URL nor base64 text") from None


def _read_file(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise KeyError_(f"{what}: cannot read {path}: {exc.strerror or exc}") from None


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise KeyError_(f"{what}: not a file, a file:/data: URL or base64 text") from None


def load_public_key(data: bytes, what: str = "public key"):
    """A public key from DER or PEM bytes (RSA or EC)."""
    from cryptography.hazmat.primitives import serialization

    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_public_key(data)
        return serialization.load_der_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyError_(f"{what} is not a DER or PEM public key: {exc}") from None


def load_private_key(data: bytes, what: str = "private key"):
    """A private key from DER (PKCS#8) or PEM bytes, unencrypted."""
    from cryptography.hazmat.primitives import serialization

    try:
        if data.lstrip().startswith(b"-----BEGIN"):
            return serialization.load_pem_private_key(data, password=None)
        return serialization.load_der_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyError_(f"{what} is not an unencrypted DER or PEM private key: {exc}") from None


def new_secret_key() -> bytes:
    """32 random bytes: an HS256 secret."""
    return secrets.token_bytes(32)


def new_key_pair(algorithm: str = "RS256") -> tuple[bytes, bytes]:
    """``(private PKCS#8 DER, public SubjectPublicKeyInfo DER)`` for ``algorithm``.

    RS256/RS384/RS512/PS256... make a 2048-bit RSA key; ES256/ES384/ES512 an EC
    key on the matching curve. ValueError for any other algorithm.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if algorithm[:2] in ("RS", "PS"):
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif algorithm in _CURVES:
        private = ec.generate_private_key(getattr(ec, _CURVES[algorithm])())
    else:
        raise ValueError(f"unsupported key pair algorithm {algorithm!r}: use RS256 or ES256 (and friends)")
    private_der = private.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
    public_der = private.public_key().public_bytes(serialization.Encoding.DER,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    return private_der, public_der


_CURVES = {"ES256": "SECP256R1", "ES384": "SECP384R1", "ES512": "SECP521R1"}
