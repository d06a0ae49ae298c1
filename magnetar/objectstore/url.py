"""Object store URLs and credentials.

URL: ``s3://BUCKET[/PREFIX][?endpoint=URL&region=NAME]``.

- ``BUCKET``: 3-63 characters of lower-case letters, digits, ``.`` and
  ``-``, starting and ending with a letter or digit (S3's rule).
- ``PREFIX``: optional; every key of the store lives under ``PREFIX/``.
- ``endpoint``: an ``http://`` or ``https://`` URL with a host and no path
  (AWS S3 when absent). With an endpoint, requests are path-style
  (``endpoint/BUCKET/key``), which every S3-compatible server accepts.
- ``region``: the signing region; else ``AWS_REGION``, ``AWS_DEFAULT_REGION``,
  the profile's ``region``, then ``us-east-1``.
- ``conditional_put``: ``on`` (default) sends ``If-None-Match: *`` with
  ``put(if_absent=True)``; ``off`` for a store that refuses or ignores that
  header (the commit's fence is the metadata transaction, not the PUT, so
  this drops only a second guard).

Credentials (:func:`resolve_credentials`), first found wins:

1. ``AWS_ACCESS_KEY_ID`` + ``AWS_SECRET_ACCESS_KEY`` (+ ``AWS_SESSION_TOKEN``);
2. the profile ``AWS_PROFILE`` (else ``default``) of the shared credentials
   file (``AWS_SHARED_CREDENTIALS_FILE``, else ``~/.aws/credentials``) or of
   the config file (``AWS_CONFIG_FILE``, else ``~/.aws/config``);
3. web identity or container credentials (``AWS_WEB_IDENTITY_TOKEN_FILE``,
   ``AWS_CONTAINER_CREDENTIALS_*``), or, for AWS without an endpoint, the
   instance metadata service: left to the S3 client, which refreshes them;
4. none: with an ``endpoint``, requests go unsigned (a local store that
   allows anonymous access, such as ``magnetar cluster up``'s SeaweedFS).

Bad input raises :class:`~magnetar.objectstore.store.ObjectStoreConfigError`
with one line that names the culprit.
"""
from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import parse_qsl, urlsplit

from .store import ObjectStoreConfigError

DEFAULT_REGION = "us-east-1"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PARAMS = ("endpoint", "region", "conditional_put")


@dataclass(frozen=True)
class ObjectStoreURL:
    """A parsed ``s3://`` URL."""

    bucket: str
    prefix: str = ""
    endpoint: str | None = None
    region: str | None = None
    conditional_put: bool = True

    def __str__(self) -> str:
        text = f"s3://{self.bucket}" + (f"/{self.prefix}" if self.prefix else "")
        params = [f"{k}={getattr(self, k)}" for k in ("endpoint", "region") if getattr(self, k)]
        if not self.conditional_put:
            params.append("conditional_put=off")
        return text + ("?" + "&".join(params) if params else "")


def parse_url(url: str) -> ObjectStoreURL:
    """Parse an object store URL (see the module docstring)."""
    if not isinstance(url, str) or not url.strip():
        raise ObjectStoreConfigError("object store URL is empty; expected s3://BUCKET/PREFIX?endpoint=...&region=...")
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ObjectStoreConfigError(
            f"object store URL {url!r} must start with s3:// (s3://BUCKET/PREFIX?endpoint=...&region=...)"
        )
    if "@" in parts.netloc or ":" in parts.netloc:
        raise ObjectStoreConfigError(
            f"object store URL {url!r}: put no credentials or port in the bucket name; "
            "credentials come from the AWS environment or ~/.aws, the server from ?endpoint="
        )
    bucket = parts.netloc
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise ObjectStoreConfigError(
            f"object store URL {url!r}: bucket {bucket!r} is not a valid bucket name "
            "(3-63 lower-case letters, digits, '.' or '-', starting and ending with a letter or digit)"
        )
    prefix = parts.path.strip("/")
    if "//" in prefix:
        raise ObjectStoreConfigError(f"object store URL {url!r}: the prefix {prefix!r} has an empty path segment")
    if parts.fragment:
        raise ObjectStoreConfigError(f"object store URL {url!r}: unexpected '#{parts.fragment}'")
    params: dict[str, str] = {}
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ObjectStoreConfigError(f"object store URL {url!r}: cannot parse the query {parts.query!r}") from None
    for key, value in pairs:
        if key not in _PARAMS:
            raise ObjectStoreConfigError(
                f"object store URL {url!r}: unknown parameter {key!r} (known: {', '.join(_PARAMS)})"
            )
        if key in params:
            raise ObjectStoreConfigError(f"object store URL {url!r}: parameter {key!r} given twice")
        if not value:
            raise ObjectStoreConfigError(f"object store URL {url!r}: parameter {key!r} is empty")
        params[key] = value
    endpoint = params.get("endpoint")
    if endpoint is not None:
        endpoint = _check_endpoint(url, endpoint)
    conditional = params.get("conditional_put", "on")
    if conditional not in ("on", "off"):
        raise ObjectStoreConfigError(f"object store URL {url!r}: conditional_put must be on or off, not {conditional!r}")
    return ObjectStoreURL(bucket=bucket, prefix=prefix, endpoint=endpoint, region=params.get("region"),
                          conditional_put=conditional == "on")


def _check_endpoint(url: str, endpoint: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ObjectStoreConfigError(
            f"object store URL {url!r}: endpoint {endpoint!r} must be http://HOST[:PORT] or https://HOST[:PORT]"
        )
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise ObjectStoreConfigError(f"object store URL {url!r}: endpoint {endpoint!r} has a bad port") from None
    if parts.path.strip("/") or parts.query or parts.fragment:
        raise ObjectStoreConfigError(
            f"object store URL {url!r}: endpoint {endpoint!r} must have no path or query "
            "(the bucket goes in s3://BUCKET)"
        )
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class Credentials:
    """Static credentials and where they came from (for messages; never the
    secret itself)."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None
    source: str = ""


def resolve_credentials(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Credentials | None:
    """Static credentials from the environment or the AWS profile files, or
    None (see the module docstring, steps 1-2). A half-given pair, a named
    profile that does not exist, or a profile whose credentials need a
    mechanism we do not run (SSO, credential_process, role_arn) raises
    :class:`ObjectStoreConfigError`."""
    env = os.environ if environ is None else environ
    key, secret = env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY")
    if key or secret:
        if not (key and secret):
            missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
            raise ObjectStoreConfigError(f"{missing} is not set but its partner is: set both or neither")
        return Credentials(key, secret, env.get("AWS_SESSION_TOKEN") or None, "environment")
    home = Path(home) if home is not None else Path.home()
    profile_named = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE")
    profile = profile_named or "default"
    found_profile = False
    for path, section in (
        (Path(env.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials"), profile),
        (Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config"),
         profile if profile == "default" else f"profile {profile}"),
    ):
        values = _read_section(path, section)
        if values is None:
            continue
        found_profile = True
        key, secret = values.get("aws_access_key_id"), values.get("aws_secret_access_key")
        if key and secret:
            return Credentials(key, secret, values.get("aws_session_token") or None, f"profile {profile!r} of {path}")
        if key or secret:
            raise ObjectStoreConfigError(
                f"profile {profile!r} of {path} has only one of aws_access_key_id and aws_secret_access_key"
            )
        unsupported = [k for k in ("credential_process", "sso_session", "sso_start_url", "role_arn") if k in values]
        if unsupported:
            raise ObjectStoreConfigError(
                f"profile {profile!r} of {path} gets its credentials through {unsupported[0]}, which magnetar "
                "does not run: export AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN instead "
                "(e.g. from `aws configure export-credentials`)"
            )
    if profile_named and not found_profile:
        raise ObjectStoreConfigError(f"AWS profile {profile!r} is not in ~/.aws/credentials or ~/.aws/config")
    return None


def resolve_region(url: ObjectStoreURL, environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """The signing region: the URL's, the environment's, the profile's, else us-east-1."""
    if url.region:
        return url.region
    env = os.environ if environ is None else environ
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if env.get(name):
            return env[name]
    home = Path(home) if home is not None else Path.home()
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    values = _read_section(
        Path(env.get("AWS_CONFIG_FILE") or home / ".aws" / "config"),
        profile if profile == "default" else f"profile {profile}",
    )
    return (values or {}).get("region") or DEFAULT_REGION


def _read_section(path: Path, section: str) -> dict[str, str] | None:
    """The section's keys, or None if the file or section is absent."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
    except FileNotFoundError:
        return None
    except (OSError, configparser.Error, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ObjectStoreConfigError(f"cannot read AWS settings file {path}: {first}") from None
    if not parser.has_section(section):
        return None
    return {k: v.strip() for k, v in parser.items(section)}
