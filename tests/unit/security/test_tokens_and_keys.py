"""Tokens (HS256 and RS256/ES256), key settings, the tokens CLI."""
from __future__ import annotations

import base64
import time

import jwt
import pytest
from typer.testing import CliRunner

from magnetar.cli import app
from magnetar.security.errors import AuthenticationError
from magnetar.security.keys import KeyError_, new_key_pair, new_secret_key, read_key_bytes
from magnetar.security.tokens import TokenVerifier, create_token

runner = CliRunner()


def test_key_settings_in_every_form(tmp_path):
    key = new_secret_key()
    path = tmp_path / "s.key"
    path.write_bytes(key)
    b64 = base64.b64encode(key).decode()
    assert read_key_bytes(f"file://{path}") == key
    assert read_key_bytes(str(path)) == key
    assert read_key_bytes(f"data:;base64,{b64}") == key
    assert read_key_bytes(f"data:application/octet-stream;base64,{b64}") == key
    assert read_key_bytes(b64) == key
    for bad in ("", f"file://{tmp_path}/missing", "data:;base64,%%%", "not base64!"):
        with pytest.raises(KeyError_):
            read_key_bytes(bad)


def test_secret_key_tokens_carry_the_role_and_expire():
    key = new_secret_key()
    verifier = TokenVerifier(secret_key=key)
    assert verifier.verify(create_token("alice", secret_key=key)).role == "alice"
    token = create_token("alice", secret_key=key, expires_in_s=60)
    claims = verifier.verify(token)
    assert claims.expires_at is not None and claims.expires_at > time.time()
    with pytest.raises(AuthenticationError, match="expired"):
        verifier.verify(token, now=time.time() + 120)
    with pytest.raises(AuthenticationError):
        TokenVerifier(secret_key=new_secret_key()).verify(token)


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_key_pair_tokens(algorithm):
    private, public = new_key_pair(algorithm)
    token = create_token("bob", private_key=private, algorithm=algorithm)
    assert TokenVerifier(public_key=public).verify(token).role == "bob"
    other_private, _ = new_key_pair(algorithm)
    with pytest.raises(AuthenticationError):
        TokenVerifier(public_key=public).verify(create_token("bob", private_key=other_private, algorithm=algorithm))


def test_a_public_key_verifier_refuses_hmac_tokens_and_garbage():
    _, public = new_key_pair("RS256")
    verifier = TokenVerifier(public_key=public)
    forged = jwt.encode({"sub": "root"}, b"x" * 32, algorithm="HS256")
    for bad in (forged, "", "a.b.c", "garbage", b"\xff\xfe", "e30." * 3,
                jwt.encode({"sub": "x"}, None, algorithm="none")):
        with pytest.raises(AuthenticationError):
            verifier.verify(bad)


def test_tokens_need_a_role_claim():
    key = new_secret_key()
    for claims in ({}, {"sub": ""}, {"sub": 7}):
        with pytest.raises(AuthenticationError, match="claim|Subject"):
            TokenVerifier(secret_key=key).verify(jwt.encode(claims, key, algorithm="HS256"))
    with pytest.raises(AuthenticationError, match="exp"):
        TokenVerifier(secret_key=key).verify(jwt.encode({"sub": "a", "exp": "soon"}, key, algorithm="HS256"))


def test_tokens_cli_round_trip(tmp_path):
    secret = tmp_path / "secret.key"
    result = runner.invoke(app, ["tokens", "create-secret-key", "--output", str(secret)])
    assert result.exit_code == 0, result.output
    assert len(secret.read_bytes()) == 32 and secret.stat().st_mode & 0o777 == 0o600
    result = runner.invoke(app, ["tokens", "create", "--subject", "alice", "--secret-key", f"file://{secret}",
                                 "--expiry-time", "1h"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    claims = TokenVerifier(secret_key=secret.read_bytes()).verify(token)
    assert claims.role == "alice" and 3500 < claims.expires_at - time.time() <= 3600
    ok = runner.invoke(app, ["tokens", "validate", token, "--secret-key", f"file://{secret}"])
    assert ok.exit_code == 0 and "alice" in ok.stdout

    priv, pub = tmp_path / "priv.key", tmp_path / "pub.key"
    result = runner.invoke(app, ["tokens", "create-key-pair", "--output-private-key", str(priv),
                                 "--output-public-key", str(pub)])
    assert result.exit_code == 0, result.output
    token = runner.invoke(app, ["tokens", "create", "--subject", "bob", "--private-key", f"file://{priv}"]).stdout
    assert TokenVerifier(public_key=pub.read_bytes()).verify(token.strip()).role == "bob"
    bad = runner.invoke(app, ["tokens", "validate", "garbage", "--public-key", str(pub)])
    assert bad.exit_code == 1 and "invalid" in bad.output


def test_tokens_cli_refuses_bad_arguments(tmp_path):
    assert runner.invoke(app, ["tokens", "create", "--subject", "a"]).exit_code == 2
    missing = runner.invoke(app, ["tokens", "create", "--subject", "a", "--secret-key", f"file://{tmp_path}/no"])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    key = tmp_path / "k"
    key.write_bytes(new_secret_key())
    assert runner.invoke(app, ["tokens", "create", "--subject", "a", "--secret-key", str(key),
                               "--expiry-time", "soon"]).exit_code == 2
