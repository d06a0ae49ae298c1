"""The object store seam: what the ledger layer needs from S3 and its kin.

Keys are ``/``-separated strings relative to the store's own prefix (the
``PREFIX`` of ``s3://BUCKET/PREFIX``); an implementation adds the prefix.

Errors, all subclasses of :class:`ObjectStoreError`:

- :class:`ObjectStoreError` itself: transient (a timeout, a refused
  connection, a 5xx answer after the client's own retries). The caller may
  retry the same call; a ``put`` that failed this way may or may not have
  stored the object, so a retry with ``if_absent`` may see
  :class:`ObjectExists` for its own object.
- :class:`ObjectStoreConfigError`: the store cannot work as configured (bad
  URL, rejected credentials, missing bucket, access denied). Not retryable;
  its message is one line that says what to fix.
- :class:`ObjectNotFound`: ``get`` of a key that is not there.
- :class:`ObjectExists`: ``put(..., if_absent=True)`` of a key that is there.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class ObjectStoreError(Exception):
    """A transient failure: the same call may succeed if retried."""


class ObjectStoreConfigError(ObjectStoreError):
    """The store is misconfigured or unreachable for good: not retryable."""


class ObjectNotFound(ObjectStoreError):
    """No object under the key."""


class ObjectExists(ObjectStoreError):
    """A conditional put found an object under the key already."""


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object: its key (relative to the store's prefix) and size."""

    key: str
    size: int


@runtime_checkable
class ObjectStore(Protocol):
    """An S3-like object store. Every method is a coroutine; see the module
    docstring for the errors."""

    #: Human-readable location, e.g. ``s3://bucket/prefix at http://host:port``.
    description: str

    async def put(self, key: str, data: bytes, *, if_absent: bool = True) -> None:
        """Store ``data`` under ``key``. With ``if_absent`` (the default) the
        put is conditional (``If-None-Match: *``) and raises
        :class:`ObjectExists` if the key exists. Some self-hosted stores do not
        make that check atomic: never rely on it alone for correctness."""
        ...

    async def get(self, key: str, start: int | None = None, end: int | None = None) -> bytes:
        """The object's bytes, or those of ``[start, end)`` (a ranged GET;
        ``end`` None: to the end). A range that runs past the end gives the
        bytes up to the end (S3's rule); :class:`ObjectNotFound` if no
        object."""
        ...

    async def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key is not an error."""
        ...

    async def list(self, prefix: str = "") -> list[ObjectInfo]:
        """Every object whose key starts with ``prefix``, sorted by key."""
        ...

    async def check(self) -> None:
        """Prove the store usable: the bucket exists and the credentials may
        list it. Raises :class:`ObjectStoreConfigError` (one line) if not;
        used at broker start so that a misconfiguration fails early."""
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
