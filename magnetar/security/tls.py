"""TLS contexts for the broker's listeners and for Magnetar's own clients.

:func:`server_context` is what the pulsar+ssl and https listeners use: the
broker's certificate chain and key from PEM files; with trust certificates
it asks TLS clients for a certificate and verifies it against them (a client
certificate that does not verify fails the handshake); with
``require_client_cert`` a client without one fails the handshake too.
TLS 1.2 is the oldest version accepted (the official client's floor).

Failure modes: :class:`TlsSetupError` naming the file that is missing or
unusable (the broker refuses to start rather than listen without TLS).
"""
from __future__ import annotations

import ssl

from .providers import PeerCertificate


class TlsSetupError(ValueError):
    """A certificate, key or trust file cannot be used."""


def server_context(certificate_file: str, key_file: str, trust_certs_file: str = "",
                   require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(certificate_file, key_file)
    except FileNotFoundError as exc:
        raise TlsSetupError(f"TLS certificate or key file not found: {exc.filename}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsSetupError(f"cannot load tls_certificate_file {certificate_file} with tls_key_file {key_file}: "
                            f"{exc}") from None
    if trust_certs_file:
        _load_trust(ctx, trust_certs_file)
        ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(trust_certs_file: str = "", certificate_file: str = "", key_file: str = "",
                   validate_hostname: bool = True, allow_insecure: bool = False) -> ssl.SSLContext:
    """A context for Magnetar's clients (the admin CLI): verify the broker, maybe present a certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if trust_certs_file:
        _load_trust(ctx, trust_certs_file)
    if allow_insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.check_hostname = validate_hostname
    if certificate_file:
        try:
            ctx.load_cert_chain(certificate_file, key_file or None)
        except (ssl.SSLError, OSError) as exc:
            raise TlsSetupError(f"cannot load client certificate {certificate_file}: {exc}") from None
    return ctx


def _load_trust(ctx: ssl.SSLContext, trust_certs_file: str) -> None:
    try:
        ctx.load_verify_locations(cafile=trust_certs_file)
    except FileNotFoundError:
        raise TlsSetupError(f"tls_trust_certs_file not found: {trust_certs_file}") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsSetupError(f"cannot load tls_trust_certs_file {trust_certs_file}: {exc}") from None


def peer_certificate(ssl_object) -> PeerCertificate | None:
    """The verified client certificate of a TLS connection (None: plain, or none presented)."""
    if ssl_object is None:
        return None
    try:
        cert = ssl_object.getpeercert()
    except ValueError:  # handshake not done
        return None
    if not cert:
        return None
    return PeerCertificate(subject=tuple(cert.get("subject", ())))
