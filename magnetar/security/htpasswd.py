"""Password files for the ``basic`` provider (Apache htpasswd format).

One ``user:hash`` per line; blank lines and lines starting with ``#`` are
skipped. Hashes Magnetar checks: bcrypt (``$2y$``/``$2b$``/``$2a$``, what
``htpasswd -B`` writes), Apache MD5 (``$apr1$``, ``htpasswd -m``, the form
Pulsar's documentation uses), MD5-crypt (``$1$``), SHA-crypt (``$5$``,
``$6$``) and traditional DES crypt (``htpasswd -d``). Plain-text and
``{SHA}`` entries are refused when the file is loaded: a file that would
accept them must not silently do so.

The file may also be given inline as ``data:;base64,...`` (as Pulsar's
``basicAuthConf``), see :func:`magnetar.security.keys.read_key_bytes`.
"""
from __future__ import annotations

from passlib.context import CryptContext

from .errors import AuthenticationError
from .keys import read_key_bytes

_CONTEXT = CryptContext(schemes=["bcrypt", "apr_md5_crypt", "md5_crypt", "sha256_crypt", "sha512_crypt",
                                 "des_crypt"])
# Checked against when the user is unknown, so that an unknown user costs as
# much as a wrong password (no user enumeration by timing).
_DUMMY = _CONTEXT.handler("apr_md5_crypt").hash("not a password")


class HtpasswdError(ValueError):
    """The password file is unreadable or has a line Magnetar cannot check."""


def parse(text: str, where: str = "basic_auth_file") -> dict[str, str]:
    """``{user: hash}``; HtpasswdError naming the line for an unusable entry."""
    users: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, hashed = line.partition(":")
        if not sep or not user or not hashed:
            raise HtpasswdError(f"{where} line {number}: expected user:hash")
        if _CONTEXT.identify(hashed, required=False) is None:
            raise HtpasswdError(f"{where} line {number}: user {user!r} has a hash Magnetar does not accept "
                                "(use bcrypt, apr1 (htpasswd -m), SHA-crypt or crypt)")
        users[user] = hashed
    return users


def load(setting: str) -> dict[str, str]:
    """Read and parse the file a ``basic_auth_file`` setting names."""
    try:
        text = read_key_bytes(setting, "basic_auth_file").decode()
    except UnicodeDecodeError:
        raise HtpasswdError("basic_auth_file is not UTF-8 text") from None
    except ValueError as exc:
        raise HtpasswdError(str(exc)) from None
    return parse(text)


def check(users: dict[str, str], user: str, password: str) -> str:
    """``user`` if ``password`` matches its hash; AuthenticationError otherwise."""
    hashed = users.get(user)
    try:
        ok = _CONTEXT.verify(password, hashed if hashed is not None else _DUMMY)
    except (ValueError, TypeError):
        ok = False
    if not ok or hashed is None:
        raise AuthenticationError("unknown user or wrong password")
    return user


def hash_password(password: str, scheme: str = "bcrypt") -> str:
    """A hash for a password file entry (tests, docs); ``scheme`` as passlib names it."""
    return _CONTEXT.handler(scheme).hash(password)
