"""Pulsar's JSON Web Tokens: making and checking them.

A token is a compact JWT whose ``sub`` claim is the role; ``exp`` (seconds
since the epoch), when present, is enforced. Tokens signed with a secret key
use HS256 (HS384/HS512 accepted); tokens signed with a private key use RS256
by default (RS*/PS*/ES* accepted), checked with the matching public key.

Which algorithms a verifier accepts follows from the key it holds, never from
the token's header: a token signed with HS256 using the public key's bytes as
the secret is refused by a public-key verifier.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import jwt

from .errors import AuthenticationError
from .keys import load_private_key, load_public_key

SECRET_ALGORITHMS = ("HS256", "HS384", "HS512")
PUBLIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
#: Pulsar's default claim holding the role.
ROLE_CLAIM = "sub"


def create_token(subject: str, *, secret_key: bytes | None = None, private_key: bytes | None = None,
                 algorithm: str | None = None, expires_in_s: float | None = None,
                 headers: dict | None = None) -> str:
    """A signed token for role ``subject``; exactly one of the keys is given.

    ``expires_in_s`` adds ``exp`` = now + that many seconds (rounded down).
    ValueError for an empty subject, both or no keys, or an algorithm that
    does not fit the key.
    """
    if not subject:
        raise ValueError("the token subject (role) must not be empty")
    if (secret_key is None) == (private_key is None):
        raise ValueError("give exactly one of a secret key and a private key")
    claims: dict = {ROLE_CLAIM: subject}
    if expires_in_s is not None:
        claims["exp"] = int(time.time() + expires_in_s)
    if secret_key is not None:
        algorithm = algorithm or "HS256"
        if algorithm not in SECRET_ALGORITHMS:
            raise ValueError(f"a secret key signs with {', '.join(SECRET_ALGORITHMS)}, not {algorithm}")
        return jwt.encode(claims, secret_key, algorithm=algorithm, headers=headers)
    algorithm = algorithm or "RS256"
    if algorithm not in PUBLIC_ALGORITHMS:
        raise ValueError(f"a private key signs with {', '.join(PUBLIC_ALGORITHMS)}, not {algorithm}")
    return jwt.encode(claims, load_private_key(private_key), algorithm=algorithm, headers=headers)


@dataclass(frozen=True)
class TokenClaims:
    role: str
    #: Seconds since the epoch after which the token is refused; None: never.
    expires_at: float | None


class TokenVerifier:
    """Checks tokens against one configured key.

    Give ``secret_key`` (bytes) or ``public_key`` (DER/PEM bytes). :meth:`verify`
    raises :class:`AuthenticationError` with a short reason for anything that
    is not a valid, unexpired token with a non-empty role claim.
    """

    def __init__(self, *, secret_key: bytes | None = None, public_key: bytes | None = None,
                 role_claim: str = ROLE_CLAIM) -> None:
        if (secret_key is None) == (public_key is None):
            raise ValueError("token verification needs exactly one of token_secret_key and token_public_key")
        if secret_key is not None:
            self._key, self._algorithms = secret_key, list(SECRET_ALGORITHMS)
        else:
            self._key = load_public_key(public_key, "token_public_key")
            self._algorithms = [a for a in PUBLIC_ALGORITHMS if _fits(a, self._key)]
        self.role_claim = role_claim

    def verify(self, token: str | bytes, now: float | None = None) -> TokenClaims:
        if isinstance(token, bytes):
            try:
                token = token.decode("ascii")
            except UnicodeDecodeError:
                raise AuthenticationError("the token is not ASCII text") from None
        token = token.strip()
        if not token:
            raise AuthenticationError("no token given")
        try:
            claims = jwt.decode(token, self._key, algorithms=self._algorithms,
                                options={"require": [], "verify_exp": False, "verify_aud": False})
        except jwt.InvalidTokenError as exc:
            raise AuthenticationError(f"invalid token: {exc}") from None
        role = claims.get(self.role_claim)
        if not isinstance(role, str) or not role:
            raise AuthenticationError(f"the token has no {self.role_claim!r} claim naming a role")
        exp = claims.get("exp")
        if exp is not None:
            if not isinstance(exp, (int, float)) or isinstance(exp, bool):
                raise AuthenticationError("the token's exp claim is not a number")
            if (time.time() if now is None else now) >= exp:
                raise AuthenticationError(f"the token expired at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(exp))}")
        return TokenClaims(role=role, expires_at=float(exp) if exp is not None else None)


def _fits(algorithm: str, key) -> bool:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if algorithm.startswith("ES"):
        return isinstance(key, ec.EllipticCurvePublicKey)
    return isinstance(key, rsa.RSAPublicKey)


def unverified_claims(token: str) -> dict:
    """The claims of ``token`` without checking its signature (for display only)."""
    try:
        return jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as exc:
        raise AuthenticationError(f"invalid token: {exc}") from None
