"""``magnetar tokens ...``: make keys and tokens, as ``pulsar tokens`` does.

Keys are written as Pulsar writes them (raw secret bytes, DER key pairs), so
keys and tokens move freely between Magnetar and Pulsar tooling. Output files
are created with mode 0600: they are secrets.
"""
from __future__ import annotations

import base64
import os
import re
import sys
from typing import Optional

import typer

# The commands import the key and token modules (cryptography, PyJWT) when
# they run: `magnetar standalone` without security does not pay for them.

app = typer.Typer(help="Create keys and tokens for token authentication (Pulsar-compatible).",
                  no_args_is_help=True, add_completion=False)

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_duration(text: str) -> float:
    """``"30s"``, ``"10m"``, ``"12h"``, ``"7d"``, ``"2w"``, ``"1y"`` (or plain seconds) -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdwy]?)\s*", text or "")
    if not m:
        raise typer.BadParameter(f"{text!r} is not a duration like 30s, 10m, 12h, 7d, 2w or 1y")
    return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def _write_secret(path: str, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        typer.echo(f"error: cannot write {path}: {exc.strerror}", err=True)
        raise typer.Exit(1)


def _key(value: str, what: str) -> bytes:
    from .keys import KeyError_, read_key_bytes

    try:
        return read_key_bytes(value, what)
    except KeyError_ as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)


@app.command("create-secret-key")
def create_secret_key(
    output: Optional[str] = typer.Option(None, "--output", "-o", help="File to write (mode 0600); default: stdout"),
    b64: bool = typer.Option(False, "--base64", "-b", help="Write the key as base64 text"),
) -> None:
    """A new random HS256 secret key (32 bytes)."""
    from .keys import new_secret_key

    key = new_secret_key()
    data = base64.b64encode(key) if b64 else key
    if output:
        _write_secret(output, data)
    else:
        sys.stdout.buffer.write(data if b64 else base64.b64encode(key))
        sys.stdout.buffer.write(b"\n")


@app.command("create-key-pair")
def create_key_pair(
    output_private_key: str = typer.Option(..., "--output-private-key", help="Private key file (PKCS#8 DER, 0600)"),
    output_public_key: str = typer.Option(..., "--output-public-key", help="Public key file (X.509 DER)"),
    algorithm: str = typer.Option("RS256", "--signature-algorithm", "-sa", help="RS256 or ES256 (and friends)"),
) -> None:
    """A new key pair: tokens are signed with the private key, brokers check them with the public key."""
    from .keys import new_key_pair

    try:
        private, public = new_key_pair(algorithm)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    _write_secret(output_private_key, private)
    try:
        with open(output_public_key, "wb") as f:
            f.write(public)
    except OSError as exc:
        typer.echo(f"error: cannot write {output_public_key}: {exc.strerror}", err=True)
        raise typer.Exit(1)


@app.command("create")
def create(
    subject: str = typer.Option(..., "--subject", "-s", help="The role the token proves"),
    secret_key: Optional[str] = typer.Option(None, "--secret-key", help="file:///path, data:;base64,... (HS256)"),
    private_key: Optional[str] = typer.Option(None, "--private-key", help="file:///path, data:;base64,... (RS256)"),
    expiry_time: Optional[str] = typer.Option(None, "--expiry-time", "-e", help="Valid for: 30s, 10m, 12h, 7d, 1y"),
    algorithm: Optional[str] = typer.Option(None, "--signature-algorithm", "-sa",
                                            help="Default HS256 with a secret key, RS256 with a private key"),
) -> None:
    """Print a signed token for a role."""
    from .keys import KeyError_
    from .tokens import create_token

    if (secret_key is None) == (private_key is None):
        typer.echo("error: give exactly one of --secret-key and --private-key", err=True)
        raise typer.Exit(2)
    expires = parse_duration(expiry_time) if expiry_time else None
    try:
        token = create_token(subject, secret_key=_key(secret_key, "--secret-key") if secret_key else None,
                             private_key=_key(private_key, "--private-key") if private_key else None,
                             algorithm=algorithm, expires_in_s=expires)
    except (ValueError, KeyError_) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(token)


@app.command("validate")
def validate(
    token: str = typer.Argument(..., help="The token (or - to read it from stdin)"),
    secret_key: Optional[str] = typer.Option(None, "--secret-key"),
    public_key: Optional[str] = typer.Option(None, "--public-key"),
) -> None:
    """Check a token's signature and expiry; print its role (exit 1 if invalid)."""
    from .errors import AuthenticationError
    from .keys import KeyError_
    from .tokens import TokenVerifier

    if (secret_key is None) == (public_key is None):
        typer.echo("error: give exactly one of --secret-key and --public-key", err=True)
        raise typer.Exit(2)
    if token == "-":
        token = sys.stdin.read().strip()
    try:
        verifier = TokenVerifier(secret_key=_key(secret_key, "--secret-key") if secret_key else None,
                                 public_key=_key(public_key, "--public-key") if public_key else None)
        claims = verifier.verify(token)
    except (AuthenticationError, KeyError_) as exc:
        typer.echo(f"invalid: {exc}", err=True)
        raise typer.Exit(1)
    typer.echo(f"valid: role {claims.role}" + (f", expires at {claims.expires_at:.0f}" if claims.expires_at else ""))


@app.command("show")
def show(token: str = typer.Argument(..., help="The token")) -> None:
    """Print a token's claims without checking its signature."""
    from .errors import AuthenticationError
    from .tokens import unverified_claims

    try:
        typer.echo(unverified_claims(token.strip()))
    except AuthenticationError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1)
