"""The broker's authentication service: the configured providers, by method.

:func:`build` makes it from the settings (reading key and password files
once; SecuritySettingsError if they are unusable, so a broker with a bad
setting does not start). :meth:`Authenticator.authenticate` follows Pulsar:

- authentication disabled: every client gets the anonymous role (or none);
- a method that is configured: its provider decides (AuthenticationError on
  a bad credential: never the anonymous role instead);
- no method, ``none``, or a method that is not configured: the anonymous
  role if ``anonymous_user_role`` is set, else AuthenticationError.
"""
from __future__ import annotations

from .errors import AuthenticationError
from .keys import KeyError_, read_key_bytes
from .providers import BasicProvider, Credential, PeerCertificate, Provider, TlsProvider, TokenProvider
from .settings import SecuritySettings, SecuritySettingsError

#: Longest auth_data a client may send (a JWT with many claims stays far below).
MAX_AUTH_DATA = 64 * 1024


class Authenticator:
    def __init__(self, providers: dict[str, Provider], enabled: bool, anonymous_role: str | None) -> None:
        self.providers = providers
        self.enabled = enabled
        self.anonymous_role = anonymous_role or None

    def authenticate(self, method: str, data: bytes, peer: PeerCertificate | None = None) -> Credential | None:
        """The credential ``data`` proves with ``method``; None: anonymous without a role."""
        if not self.enabled:
            return Credential(self.anonymous_role, "none") if self.anonymous_role else None
        if len(data) > MAX_AUTH_DATA:
            raise AuthenticationError(f"auth_data is larger than {MAX_AUTH_DATA} bytes")
        provider = self.providers.get(method)
        if provider is None:
            if self.anonymous_role:
                return Credential(self.anonymous_role, "none")
            if method and method != "none":
                raise AuthenticationError(f"authentication method {method!r} is not enabled on this broker "
                                          f"(enabled: {', '.join(sorted(self.providers))})")
            raise AuthenticationError("authentication is required and no credential was given")
        return provider.authenticate(data, peer)


def build(settings: SecuritySettings) -> Authenticator:
    """The providers ``settings`` name. Token and basic load their libraries
    (PyJWT and cryptography, passlib) here, only when configured: an idle
    broker without them does not carry them."""
    providers: dict[str, Provider] = {}
    for method in settings.authentication_providers:
        from . import htpasswd
        from .tokens import TokenVerifier

        try:
            if method == "token":
                if settings.token_secret_key:
                    verifier = TokenVerifier(secret_key=read_key_bytes(settings.token_secret_key, "token_secret_key"))
                else:
                    verifier = TokenVerifier(public_key=read_key_bytes(settings.token_public_key, "token_public_key"))
                providers[method] = TokenProvider(verifier)
            elif method == "basic":
                providers[method] = BasicProvider(htpasswd.load(settings.basic_auth_file))
            elif method == "tls":
                providers[method] = TlsProvider()
        except (KeyError_, htpasswd.HtpasswdError, ValueError) as exc:
            raise SecuritySettingsError(str(exc)) from None
    return Authenticator(providers, settings.authentication_enabled, settings.anonymous_user_role)
