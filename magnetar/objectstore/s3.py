"""The object store on S3 and S3-compatible servers, through ``obstore``
(Rust's ``object_store`` crate with Python bindings: asyncio-native,
conditional puts, ranged GETs). Why obstore and not aiobotocore:
docs/object-storage.md, "Choosing the S3 client".

Usage::

    store = open_object_store("s3://bucket/prefix?endpoint=http://127.0.0.1:8333")
    await store.check()                 # ObjectStoreConfigError if unusable
    await store.put("a/b", b"...")      # If-None-Match: *
    data = await store.get("a/b", 0, 100)
    await store.close()

Timeouts and retries are bounded: a request connects within
``connect_timeout`` s and completes within ``request_timeout`` s; the
client retries transient failures (connection errors, 5xx, 429) for at most
``retry_timeout`` s in all, then raises :class:`ObjectStoreError`.
"""
from __future__ import annotations

import asyncio
import gc
import os
import re
import uuid
from datetime import timedelta
from typing import Mapping

import obstore
import obstore.exceptions as obx
from obstore.store import S3Store

from .store import ObjectExists, ObjectInfo, ObjectNotFound, ObjectStoreConfigError, ObjectStoreError
from .url import ObjectStoreURL, parse_url, resolve_credentials, resolve_region

# obstore raises its own classes and, for some, Python's built-in ones.
_NOT_FOUND = (obx.NotFoundError, FileNotFoundError)
_EXISTS = (obx.AlreadyExistsError, obx.PreconditionError, FileExistsError)
_FAILED = (obx.BaseError, OSError, RuntimeError, ValueError)

#: Where the client looks for AWS settings of its own (web identity,
#: containers): we pass those through and nothing else from the environment.
_PASS_THROUGH = {
    "AWS_WEB_IDENTITY_TOKEN_FILE": "web_identity_token_file",
    "AWS_ROLE_ARN": "role_arn",
    "AWS_ROLE_SESSION_NAME": "role_session_name",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "container_credentials_relative_uri",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI": "container_credentials_full_uri",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "container_authorization_token_file",
}


def open_object_store(
    url: str | ObjectStoreURL,
    *,
    environ: Mapping[str, str] | None = None,
    connect_timeout: float = 3.0,
    request_timeout: float = 30.0,
    retry_timeout: float = 10.0,
) -> "S3ObjectStore":
    """An :class:`S3ObjectStore` for ``url``; :class:`ObjectStoreConfigError`
    (one line) for a bad URL or bad AWS settings. Makes no request."""
    parsed = parse_url(url) if isinstance(url, str) else url
    env = os.environ if environ is None else environ
    config: dict = {"region": resolve_region(parsed, env)}
    credentials = resolve_credentials(env)
    if credentials is not None:
        config["access_key_id"] = credentials.access_key_id
        config["secret_access_key"] = credentials.secret_access_key
        if credentials.session_token:
            config["session_token"] = credentials.session_token
    else:
        passed = {opt: env[name] for name, opt in _PASS_THROUGH.items() if env.get(name)}
        config.update(passed)
        if not passed and parsed.endpoint:
            config["skip_signature"] = True  # see url.py, step 4
    if parsed.bucket.endswith("--x-s3"):
        config["s3_express"] = True  # a directory bucket: S3 Express One Zone's session auth
    if parsed.endpoint:
        config["endpoint"] = parsed.endpoint
        config["virtual_hosted_style_request"] = False
    client_options = {
        "allow_http": bool(parsed.endpoint and parsed.endpoint.startswith("http://")),
        "connect_timeout": timedelta(seconds=connect_timeout),
        "timeout": timedelta(seconds=request_timeout),
    }
    retry = {
        "max_retries": 10,
        "retry_timeout": timedelta(seconds=retry_timeout),
        "backoff": {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2), "base": 2},
    }
    try:
        store = S3Store(
            parsed.bucket,
            prefix=parsed.prefix or None,
            config=config,
            client_options=client_options,
            retry_config=retry,
        )
    except _FAILED as exc:
        raise ObjectStoreConfigError(f"object store {parsed}: {_one_line(exc)}") from None
    return S3ObjectStore(store, parsed)


class S3ObjectStore:
    """:class:`~magnetar.objectstore.store.ObjectStore` on an S3 bucket."""

    def __init__(self, store: S3Store, url: ObjectStoreURL) -> None:
        self._store = store
        self.url = url
        where = url.endpoint or "AWS S3"
        self.description = f"s3://{url.bucket}" + (f"/{url.prefix}" if url.prefix else "") + f" at {where}"

    async def put(self, key: str, data: bytes, *, if_absent: bool = True) -> None:
        try:
            conditional = if_absent and self.url.conditional_put
            await obstore.put_async(self._live(), key, data, mode="create" if conditional else "overwrite")
        except _EXISTS:
            raise ObjectExists(f"{self.description}: object {key!r} exists already") from None
        except _FAILED as exc:
            raise self._error("put", key, exc) from None

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        try:
            if end is not None:
                return bytes(await obstore.get_range_async(self._live(), key, start=start or 0, end=end))
            options = {"range": {"offset": start}} if start else None
            result = await obstore.get_async(self._live(), key, options=options)
            return bytes(await result.bytes_async())
        except _NOT_FOUND:
            raise ObjectNotFound(f"{self.description}: no object {key!r}") from None
        except _FAILED as exc:
            raise self._error("get", key, exc) from None

    async def delete(self, key: str) -> None:
        try:
            await obstore.delete_async(self._live(), key)
        except _NOT_FOUND:
            return
        except _FAILED as exc:
            raise self._error("delete", key, exc) from None

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        found: list[ObjectInfo] = []
        try:
            metas = await obstore.list(self._live(), prefix or None, chunk_size=1000).collect_async()
            found.extend(ObjectInfo(meta["path"], meta["size"]) for meta in metas)
        except _FAILED as exc:
            raise self._error("list", prefix, exc) from None
        found.sort(key=lambda info: info.key)
        return found

    async def check(self, timeout: float = 15.0) -> None:
        """Within ``timeout`` s: LIST the bucket, then PUT a probe object twice
        with ``If-None-Match: *`` (the second must be refused: the store keeps
        conditional puts) and delete it. Every failure is an
        :class:`ObjectStoreConfigError` here: at start, an unreachable store
        is a configuration to fix, not a blip to wait out. With
        ``conditional_put=off`` the probe is one plain PUT."""
        probe_key = f"magnetar-check-probe/{uuid.uuid4().hex}"

        async def probe() -> None:
            # One LIST under a prefix nothing uses: cheap on any bucket, and
            # it tells a missing bucket or bad credentials apart.
            await obstore.list_with_delimiter_async(self._live(), "magnetar-check-probe/")
            await self.put(probe_key, b"probe")
            try:
                if self.url.conditional_put:
                    try:
                        await self.put(probe_key, b"again")
                    except ObjectExists:
                        pass
                    else:
                        raise ObjectStoreConfigError(
                            f"object store {self.description} ignores If-None-Match: * on PUT (a second "
                            "conditional put of one key succeeded); add conditional_put=off to the URL to "
                            "run without that second guard (the commit's fence is in etcd)")
            finally:
                await self.delete(probe_key)

        try:
            await asyncio.wait_for(probe(), timeout)
        except asyncio.TimeoutError:
            raise ObjectStoreConfigError(f"object store {self.description} did not answer within {timeout:g} s") from None
        except ObjectStoreConfigError:
            raise
        except ObjectStoreError as exc:
            raise ObjectStoreConfigError(f"object store {self.description} is not usable: "
                                         f"{str(exc).split(' failed: ', 1)[-1]}") from None
        except _FAILED as exc:
            raise ObjectStoreConfigError(f"object store {self.description} is not usable: {_reason(exc)}") from None

    def _live(self) -> S3Store:
        if self._store is None:
            raise ObjectStoreError(f"object store {self.description} is closed")
        return self._store

    async def close(self) -> None:
        # obstore's client lives in Rust and is freed when the last reference
        # goes. Drop ours now, inside the event loop: freed later, during
        # interpreter shutdown, it can abort the process (seen with 0.12.1
        # after a refused connection). The loop matters too: see
        # check_object_store.
        self._store = None
        gc.collect()

    async def __aenter__(self) -> "S3ObjectStore":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _error(self, op: str, key: str, exc: Exception) -> ObjectStoreError:
        reason = _reason(exc)
        text = f"object store {self.description}: {op} {key!r} failed: {reason}"
        if isinstance(exc, (obx.PermissionDeniedError, obx.UnauthenticatedError, PermissionError)) \
                or _is_config(str(exc)):
            return ObjectStoreConfigError(text)
        return ObjectStoreError(text)


_CONFIG_MARKERS = (
    "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
    "InvalidBucketName", "AuthorizationHeaderMalformed", "PermanentRedirect",
)


def _is_config(text: str) -> bool:
    return any(marker in text for marker in _CONFIG_MARKERS)


def _reason(exc: Exception) -> str:
    """A short reason from obstore's multi-line error text (its first line
    and the chain of causes below it)."""
    text = str(exc)
    for marker in _CONFIG_MARKERS:
        if marker in text:
            hints = {
                "NoSuchBucket": "the bucket does not exist (NoSuchBucket)",
                "InvalidAccessKeyId": "the access key is not known to the store (InvalidAccessKeyId)",
                "SignatureDoesNotMatch": "the secret key is wrong (SignatureDoesNotMatch)",
                "AccessDenied": "access denied (AccessDenied): check the credentials and the bucket policy",
            }
            return hints.get(marker, marker)
    lowered = text.lower()
    if any(mark in lowered for mark in ("latest/api/token", "latest/meta-data", "169.254.169.254", "169.254.170.2")):
        return ("no AWS credentials: none in the environment or ~/.aws, and the instance metadata service "
                "gave none (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)")
    if "connection refused" in lowered:
        return "connection refused"
    if "dns error" in lowered or "failed to lookup address" in lowered:
        return "cannot resolve the endpoint's host name"
    endpoint_hint = _endpoint_hint(text, lowered)
    if endpoint_hint:
        return endpoint_hint
    # obstore prints its settings too ("retry_timeout: 10s"): not a time-out.
    if "timed out" in lowered or "timeout" in lowered.replace("retry_timeout", ""):
        return "timed out"
    return _one_line(exc)


_STATUS = re.compile(r"Server returned non-2xx status code: (\d{3})(?: ([^:\n]*))?")
_CERTIFICATE = re.compile(r"invalid peer certificate: (\w+)", re.IGNORECASE)


def _endpoint_hint(text: str, lowered: str) -> str:
    """The reason, and what to check, when the endpoint is not an S3 API
    speaking the scheme the URL gave (a console's port, https at an http
    port, an untrusted certificate); "" for other failures."""
    status = _STATUS.search(text)
    if status:
        code, phrase = status.group(1), (status.group(2) or "").strip()
        answered = f"the endpoint answered HTTP {code}{' ' + phrase if phrase else ''}"
        if code.startswith("5") or code == "429":
            return answered  # the store's own trouble (after the client's retries), not a wrong address
        return (f"{answered} to an S3 request: check that endpoint= is the S3 API's address and port (not a web "
                "console or another service)")
    if "etag header missing" in lowered:
        return ("the endpoint answered without an ETag, as no S3 API does: check that endpoint= is the S3 API's "
                "address and port (not a web console or another service)")
    if "invalidcontenttype" in lowered or "wrong version number" in lowered:
        return ("TLS handshake failed: the endpoint does not speak TLS on that port; use http:// in endpoint= "
                "or the port of its TLS listener")
    certificate = _CERTIFICATE.search(text)
    if certificate:
        return (f"TLS handshake failed: the endpoint's certificate is not accepted ({certificate.group(1)}): "
                "check its host name and that its CA is trusted")
    if "connection closed before message completed" in lowered or "incompletemessage" in lowered:
        return ("the endpoint closed the connection without an HTTP answer: if it serves TLS, use https:// in "
                "endpoint=")
    return ""


def _one_line(exc: Exception, limit: int = 200) -> str:
    """obstore's first line, its cause only: it reads "<what was done> in
    <time>, after N retries, <settings> - <cause>"; the request's URL and
    settings say nothing the broker's line does not."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and line.strip() != "Debug source:"]
    text = lines[0] if lines else type(exc).__name__
    if " - " in text:
        text = text.rsplit(" - ", 1)[1].strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_object_store(url: str, timeout: float = 15.0) -> None:
    """Open the store at ``url``, :meth:`S3ObjectStore.check` it, close it:
    :class:`ObjectStoreConfigError` (one line) if it is not usable. Runs its
    own event loop: for a command's start-up, before the broker's loop."""
    async def probe() -> None:
        async with open_object_store(url, retry_timeout=min(timeout, 10.0)) as store:
            await store.check(timeout)

    try:
        import uvloop
    except ImportError:  # pragma: no cover (uvloop is a dependency; Windows lacks it)
        asyncio.run(probe())
        return
    # uvloop, as the broker: obstore's Rust threads hand each result to the
    # loop with call_soon_threadsafe, and asyncio's wake-up write releases the
    # GIL in that call. A thread that must take the GIL back after the main
    # thread began shutting the interpreter down aborts the process (about
    # 1 exit in 20 after a refused connection, exit 134 instead of 1);
    # uvloop's wake-up keeps the GIL.
    uvloop.run(probe())
