"""The broker settings about TLS, authentication and authorization.

:class:`SecuritySettings` is a base of the broker's configuration dataclass,
so these are top-level keys of the TOML file (documented in
``magnetar.example.toml``; docs/security.md has worked examples). The names
are the snake_case forms of Pulsar's ``broker.conf`` keys.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PROVIDERS = ("token", "basic", "tls")


class SecuritySettingsError(ValueError):
    """A security setting is missing, contradictory or malformed."""


@dataclass
class SecuritySettings:
    #: pulsar+ssl port (Pulsar's 6651), served once tls_certificate_file is set;
    #: -1: no TLS listener; 0 picks a free port.
    tls_port: int = 6651
    #: https admin port (Pulsar's 8443), served once tls_certificate_file is set;
    #: -1: no https listener; 0 picks a free port.
    admin_tls_port: int = 8443
    #: PEM certificate (chain) the TLS listeners present.
    tls_certificate_file: str = ""
    #: PEM private key of that certificate.
    tls_key_file: str = ""
    #: PEM CA certificates that client certificates are checked against; empty:
    #: client certificates are not asked for.
    tls_trust_certs_file: str = ""
    #: Refuse TLS clients without a certificate signed by tls_trust_certs_file.
    tls_require_trusted_client_cert: bool = False
    #: Check every client's credential (binary CONNECT and admin API requests).
    authentication_enabled: bool = False
    #: Accepted methods: any of "token", "basic", "tls".
    authentication_providers: list = field(default_factory=list)
    #: HS256 secret for tokens: file:///path, data:;base64,..., a path or base64.
    token_secret_key: str = ""
    #: Public key (RS256/ES256) for tokens, in the same forms.
    token_public_key: str = ""
    #: htpasswd file for the basic provider (bcrypt, apr1, SHA-crypt, crypt).
    basic_auth_file: str = ""
    #: Seconds between two checks of every connection's credential for expiry;
    #: an expired one is challenged (AUTH_CHALLENGE) or the connection closed.
    auth_refresh_check_interval_s: float = 60.0
    #: Check every operation against the roles' permissions.
    authorization_enabled: bool = False
    #: Roles allowed everything (and to manage tenants and clusters).
    super_user_roles: list = field(default_factory=list)
    #: Role of a client that sends no credential; empty: such clients are refused
    #: while authentication is enabled.
    anonymous_user_role: str = ""
    #: How this broker authenticates to other brokers (geo-replication's
    #: producers): "token", "basic" or "tls" (or Pulsar's class names); empty: none.
    broker_client_authentication_plugin: str = ""
    #: Its parameters: "token:<jwt>" or "file:///path" for token, "user:password"
    #: for basic, "tlsCertFile:/path,tlsKeyFile:/path" for tls.
    broker_client_authentication_parameters: str = ""
    #: Replicators connect to other clusters over pulsar+ssl (their
    #: brokerServiceUrlTls), Pulsar's brokerClientTlsEnabled.
    broker_client_tls_enabled: bool = False
    #: CAs the other clusters' certificates must chain to; empty:
    #: tls_trust_certs_file, and with that empty too the system's CAs.
    broker_client_trust_certs_file_path: str = ""

    @property
    def broker_client_trust_certs(self) -> str:
        """The CA file replicators trust (empty: the system's), Pulsar's fallback
        from brokerClientTrustCertsFilePath to tlsTrustCertsFilePath."""
        return self.broker_client_trust_certs_file_path or self.tls_trust_certs_file

    @property
    def tls_enabled(self) -> bool:
        """Whether the TLS listeners run (a certificate is configured)."""
        return bool(self.tls_certificate_file)

    def validate_security(self) -> None:
        """SecuritySettingsError for settings that cannot work together."""
        for name in ("tls_port", "admin_tls_port"):
            value = getattr(self, name)
            if not (-1 <= value <= 65535):
                raise SecuritySettingsError(f"{name} must be -1 (off) or 0..65535, got {value}")
        if bool(self.tls_certificate_file) != bool(self.tls_key_file):
            raise SecuritySettingsError("TLS needs both tls_certificate_file and tls_key_file")
        if self.tls_require_trusted_client_cert and not self.tls_trust_certs_file:
            raise SecuritySettingsError("tls_require_trusted_client_cert needs tls_trust_certs_file")
        if not isinstance(self.authentication_providers, list) or not all(
                p in PROVIDERS for p in self.authentication_providers):
            raise SecuritySettingsError(f"authentication_providers must be a list of {', '.join(PROVIDERS)}, "
                                        f"got {self.authentication_providers!r}")
        plugin = self.broker_client_authentication_plugin.rsplit(".", 1)[-1].lower()
        if plugin not in ("", "token", "authenticationtoken", "basic", "authenticationbasic", "tls",
                          "authenticationtls"):
            raise SecuritySettingsError(f"broker_client_authentication_plugin must be token, basic or tls, "
                                        f"got {self.broker_client_authentication_plugin!r}")
        if plugin and not self.broker_client_authentication_parameters:
            raise SecuritySettingsError("broker_client_authentication_plugin needs "
                                        "broker_client_authentication_parameters")
        if plugin in ("tls", "authenticationtls") and not self.broker_client_tls_enabled:
            # A client certificate only travels in a TLS handshake.
            raise SecuritySettingsError("broker_client_authentication_plugin tls needs broker_client_tls_enabled")
        if self.authentication_enabled and not self.authentication_providers:
            raise SecuritySettingsError("authentication_enabled needs at least one authentication_providers entry")
        if "token" in self.authentication_providers and bool(self.token_secret_key) == bool(self.token_public_key):
            raise SecuritySettingsError("the token provider needs exactly one of token_secret_key and token_public_key")
        if "basic" in self.authentication_providers and not self.basic_auth_file:
            raise SecuritySettingsError("the basic provider needs basic_auth_file")
        if "tls" in self.authentication_providers and not self.tls_trust_certs_file:
            raise SecuritySettingsError("the tls provider needs tls_trust_certs_file (to verify client certificates)")
        if self.authorization_enabled and not self.authentication_enabled:
            raise SecuritySettingsError("authorization_enabled needs authentication_enabled (roles come from it)")
        if not isinstance(self.super_user_roles, list) or not all(isinstance(r, str) for r in self.super_user_roles):
            raise SecuritySettingsError("super_user_roles must be a list of role names")
        if self.auth_refresh_check_interval_s <= 0:
            raise SecuritySettingsError("auth_refresh_check_interval_s must be positive")
