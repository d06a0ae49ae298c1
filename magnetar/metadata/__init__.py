"""Metadata layer: versioned keys, compare-and-set, watches, sessions, counters.

The contract is :class:`MetadataStore` (see :mod:`magnetar.metadata.store`).
Pick a backend by URL with :func:`open_store`:

- ``memory:`` — in-process, nothing survives (tests);
- ``sqlite:///abs/path/meta.db`` or ``sqlite:relative/meta.db`` — durable,
  one process (the standalone broker);
- ``etcd://HOST:PORT[,HOST:PORT...]/PREFIX`` — an etcd v3 cluster (its members) shared by the brokers of a
  cluster, keys under PREFIX (:mod:`magnetar.metadata.etcd`).
"""
from __future__ import annotations

from .election import LeaderElection
from .memory import MemoryMetadataStore
from .sqlite import SqliteMetadataStore
from .store import (
    BadVersion,
    Compare,
    Delete,
    Put,
    TransactionFailed,
    EventType,
    MetadataError,
    MetadataStore,
    KeyNotFound,
    Notification,
    Record,
    MetadataSession,
    SessionExpired,
    Watch,
    parent_of,
)

__all__ = [
    "BadVersion",
    "Compare",
    "Delete",
    "Put",
    "TransactionFailed",
    "EtcdMetadataStore",
    "EtcdSession",
    "EventType",
    "LeaderElection",
    "MemoryMetadataStore",
    "MetadataError",
    "MetadataStore",
    "KeyNotFound",
    "Notification",
    "Record",
    "MetadataSession",
    "SessionExpired",
    "SqliteMetadataStore",
    "Watch",
    "open_store",
    "parent_of",
]


def __getattr__(name: str):
    # The etcd backend loads gRPC: only when a cluster asks for it.
    if name in ("EtcdMetadataStore", "EtcdSession"):
        from . import etcd

        return getattr(etcd, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def open_store(url: str, *, unwatched: tuple[str, ...] = ()) -> MetadataStore:
    """Open the store named by ``url``.

    ``memory:`` (or ``memory://``) gives a new in-memory store.
    ``sqlite:///abs/path.db`` (or ``sqlite:/abs/path.db``) names an absolute
    path, ``sqlite:rel/path.db`` a path relative to the working directory; the
    path is taken literally (no %-decoding). ``etcd://HOST:PORT/PREFIX``
    connects to etcd, keys under PREFIX (optional). Raises ValueError for any
    other form, and whatever the backend's ``open`` raises (e.g.
    MetadataError if the file is in use or etcd does not answer).
    ``unwatched`` names key roots no watch hears (see the store contract).
    """
    scheme, sep, rest = url.partition(":")
    scheme = scheme.lower()
    if sep and scheme == "memory" and rest in ("", "//"):
        return await MemoryMetadataStore.open(unwatched=unwatched)
    if sep and scheme == "sqlite":
        if rest.startswith("//"):
            if not rest.startswith("///"):
                raise ValueError(
                    f"bad metadata store URL {url!r}: sqlite URLs have no host; "
                    "use sqlite:///abs/path.db or sqlite:relative/path.db"
                )
            rest = rest[2:]
        if "?" in rest or "#" in rest:
            raise ValueError(f"bad metadata store URL {url!r}: '?' and '#' are not allowed in sqlite paths")
        if not rest or rest.endswith("/"):
            raise ValueError(f"bad metadata store URL {url!r}: no database file name")
        return await SqliteMetadataStore.open(rest, unwatched=unwatched)
    if sep and scheme == "etcd":
        from .etcd import EtcdMetadataStore

        return await EtcdMetadataStore.open(url, unwatched=unwatched)
    raise ValueError(
        f"unknown metadata store URL {url!r}: expected 'memory:', "
        "'sqlite:///abs/path.db', 'sqlite:relative/path.db' or 'etcd://HOST:PORT/PREFIX'"
    )
