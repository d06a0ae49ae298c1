"""Providers, the authenticator and the per-connection state machine (refresh by challenge)."""
from __future__ import annotations

import time

import pytest

from magnetar.security import htpasswd
from magnetar.security.authentication import Authenticator, build
from magnetar.security.connection_auth import (REFRESH_AUTH_DATA, Accept, AuthState, Challenge, Close,
                                               ConnectionAuth, Refuse)
from magnetar.security.errors import AuthenticationError
from magnetar.security.keys import new_secret_key
from magnetar.security.providers import BasicProvider, PeerCertificate, TlsProvider
from magnetar.security.settings import SecuritySettings, SecuritySettingsError
from magnetar.security.tokens import create_token


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret.key"
    path.write_bytes(new_secret_key())
    return path


@pytest.fixture
def passwd(tmp_path):
    path = tmp_path / "htpasswd"
    path.write_text("# users\n"
                    f"alice:{htpasswd.hash_password('wonder', 'bcrypt').replace('$2b$', '$2y$', 1)}\n"
                    f"bob:{htpasswd.hash_password('builder', 'apr_md5_crypt')}\n"
                    f"carol:{htpasswd.hash_password('crypt', 'des_crypt')}\n"
                    f"dave:{htpasswd.hash_password('sha', 'sha512_crypt')}\n")
    return path


def settings(**kw) -> SecuritySettings:
    s = SecuritySettings(**kw)
    s.validate_security()
    return s


def test_basic_provider_accepts_the_hashes_pulsar_users_have(passwd):
    provider = BasicProvider(htpasswd.load(str(passwd)))
    for user, password in (("alice", "wonder"), ("bob", "builder"), ("carol", "crypt"), ("dave", "sha")):
        assert provider.authenticate(f"{user}:{password}".encode(), None).role == user
        assert provider.authenticate(f"{user}:{password}".encode(), None).role == user  # remembered
    for bad in (b"alice:wrong", b"nobody:wonder", b"alice", b":x", b"\xff:\xfe", b""):
        with pytest.raises(AuthenticationError):
            provider.authenticate(bad, None)


def test_password_files_with_unusable_lines_are_refused(tmp_path):
    for text in ("alice:plaintext\n", "no-colon\n", "bob:{SHA}fEqNCco3Yq9h5ZUglD3CZJT4lBs=\n"):
        with pytest.raises(htpasswd.HtpasswdError, match="line 1"):
            htpasswd.parse(text)
    with pytest.raises(htpasswd.HtpasswdError, match="neither an existing file"):
        htpasswd.load(str(tmp_path / "missing"))


def test_tls_provider_takes_the_common_name():
    peer = PeerCertificate(subject=((("countryName", "NL"),), (("commonName", "alice"),)))
    assert TlsProvider().authenticate(b"", peer).role == "alice"
    with pytest.raises(AuthenticationError, match="certificate"):
        TlsProvider().authenticate(b"", None)
    with pytest.raises(AuthenticationError, match="common name"):
        TlsProvider().authenticate(b"", PeerCertificate(subject=((("countryName", "NL"),),)))


def test_authenticator_follows_pulsars_anonymous_rules(secret):
    auth = build(settings(authentication_enabled=True, authentication_providers=["token"],
                          token_secret_key=f"file://{secret}"))
    token = create_token("alice", secret_key=secret.read_bytes())
    assert auth.authenticate("token", token.encode()).role == "alice"
    with pytest.raises(AuthenticationError, match="required"):
        auth.authenticate("none", b"")
    with pytest.raises(AuthenticationError, match="not enabled"):
        auth.authenticate("basic", b"a:b")
    with pytest.raises(AuthenticationError, match="larger"):
        auth.authenticate("token", b"x" * 100_000)
    anonymous = build(settings(authentication_enabled=True, authentication_providers=["token"],
                               token_secret_key=f"file://{secret}", anonymous_user_role="guest"))
    assert anonymous.authenticate("", b"").role == "guest"
    with pytest.raises(AuthenticationError):  # a bad credential is not downgraded to anonymous
        anonymous.authenticate("token", b"garbage")
    assert Authenticator({}, enabled=False, anonymous_role=None).authenticate("token", b"whatever") is None


@pytest.mark.parametrize("kw,match", [
    (dict(authentication_enabled=True), "at least one"),
    (dict(authentication_providers=["kerberos"]), "authentication_providers"),
    (dict(authentication_providers=["token"]), "exactly one"),
    (dict(authentication_providers=["basic"]), "basic_auth_file"),
    (dict(authentication_providers=["tls"]), "tls_trust_certs_file"),
    (dict(authorization_enabled=True), "needs authentication_enabled"),
    (dict(tls_certificate_file="c.pem"), "both"),
    (dict(tls_require_trusted_client_cert=True), "tls_trust_certs_file"),
    (dict(tls_port=70000), "tls_port"),
])
def test_contradictory_settings_are_refused(kw, match):
    with pytest.raises(SecuritySettingsError, match=match):
        settings(**kw)


def test_unreadable_key_files_stop_the_build(tmp_path):
    with pytest.raises(SecuritySettingsError, match="cannot read"):
        build(settings(authentication_enabled=True, authentication_providers=["token"],
                       token_secret_key=f"file://{tmp_path}/missing"))
    bad = tmp_path / "pub"
    bad.write_bytes(b"not a key")
    with pytest.raises(SecuritySettingsError, match="public key"):
        build(settings(authentication_enabled=True, authentication_providers=["token"],
                       token_public_key=str(bad)))


def _token_auth(secret):
    return build(settings(authentication_enabled=True, authentication_providers=["token", "basic"],
                          token_secret_key=f"file://{secret}", basic_auth_file="data:;base64,"))


def test_connection_auth_refreshes_an_expiring_token_by_challenge(secret):
    key = secret.read_bytes()
    cnx = ConnectionAuth(_token_auth(secret))
    assert cnx.connect("token", create_token("alice", secret_key=key, expires_in_s=5).encode(),
                       supports_refresh=True) == Accept("alice")
    now = time.time()
    assert cnx.tick(now) is None
    assert cnx.tick(now + 10) == Challenge("token", REFRESH_AUTH_DATA)
    assert cnx.state is AuthState.CHALLENGED
    fresh = create_token("alice", secret_key=key, expires_in_s=3600)
    assert cnx.auth_response("token", fresh.encode()) == Accept("alice")
    assert cnx.tick(now + 10) is None and cnx.state is AuthState.AUTHENTICATED


def test_connection_auth_closes_when_refresh_is_impossible_or_wrong(secret):
    key = secret.read_bytes()
    short = create_token("alice", secret_key=key, expires_in_s=5).encode()
    later = time.time() + 10

    no_refresh = ConnectionAuth(_token_auth(secret))
    no_refresh.connect("token", short, supports_refresh=False)
    assert isinstance(no_refresh.tick(later), Close)

    silent = ConnectionAuth(_token_auth(secret))
    silent.connect("token", short, supports_refresh=True)
    assert isinstance(silent.tick(later), Challenge)
    assert isinstance(silent.tick(later + 60), Close)  # not answered by the next check

    other_role = ConnectionAuth(_token_auth(secret))
    other_role.connect("token", short, supports_refresh=True)
    other_role.tick(later)
    refused = other_role.auth_response("token", create_token("mallory", secret_key=key).encode())
    assert isinstance(refused, Refuse) and "role" in refused.reason

    garbage = ConnectionAuth(_token_auth(secret))
    garbage.connect("token", short, supports_refresh=True)
    garbage.tick(later)
    assert isinstance(garbage.auth_response("token", b"\x00garbage"), Refuse)
    assert garbage.state is AuthState.CLOSED


def test_connection_auth_refuses_bad_connects_and_unasked_responses(secret):
    cnx = ConnectionAuth(_token_auth(secret))
    refused = cnx.connect("token", b"not-a-jwt", supports_refresh=True)
    assert isinstance(refused, Refuse) and cnx.state is AuthState.CLOSED
    expired = ConnectionAuth(_token_auth(secret))
    refused = expired.connect("token", create_token("a", secret_key=secret.read_bytes(), expires_in_s=-5).encode(),
                              supports_refresh=True)
    assert isinstance(refused, Refuse) and "expired" in refused.reason
    ok = ConnectionAuth(_token_auth(secret))
    ok.connect("token", create_token("a", secret_key=secret.read_bytes()).encode(), supports_refresh=True)
    assert isinstance(ok.auth_response("token", b"x"), Refuse)
