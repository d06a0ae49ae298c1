"""The MetadataStore contract: versioned keys, compare-and-set, watches, sessions.

Keys are ``/``-separated absolute paths (``/managed-ledgers/persistent/public/default/t``);
a malformed key (relative, ``//``, trailing ``/``, NUL) raises ``ValueError``.
Values are bytes; callers choose their encoding (JSON everywhere in Magnetar).

Versions: every key has an integer version that starts at 0 when the key is
created and grows by one on every put. A deleted and re-created key starts
again at 0. ``expected_version`` makes a write conditional:

- ``None``: unconditional;
- ``-1``: the key must not exist (create);
- ``n >= 0``: the key must exist with version ``n``.

A failed condition raises :class:`BadVersion`; a delete or conditional update
of a missing key raises :class:`KeyNotFound`. Nothing is changed when either is
raised. Any other ``expected_version`` raises ``ValueError``. Every operation
is atomic: a compare-and-set is checked and applied as one step.

Sessions: a key written with a session is ephemeral; it is deleted when the
session is closed or expires (its keepalive stops for longer than its TTL).
Writing with a session that is closed or expired raises :class:`SessionExpired`.
An unconditional put over an ephemeral key hands the key to the new writer's
session (or makes it persistent if written without one).
The end of a session is reported at once: ``await session.wait_ended()``
returns and callbacks given to ``session.on_end(cb)`` run (on the event loop,
each once) as soon as the store knows the session is closed or lost;
``session.expired`` then says it was lost (keepalive failed past its TTL, or
the lease was revoked behind our back) rather than closed by its owner. A
broker stops serving what the session owned when it ends.

Watches: ``watch(prefix, callback)`` calls ``callback(Notification)`` for every
create, update and delete of a key equal to or under ``prefix``, after the
change is durable. Callbacks run on the event loop and must not block; an
exception in one is reported to the loop's exception handler and does not stop
the others. Notifications arrive in commit order. A watch is told of every
change made by an operation started after ``watch()`` returned, of none made by
an operation whose ``await`` had returned before ``watch()`` was called (changes
in flight at that moment may go either way), and of nothing once ``cancel()``
returned. Counters do not notify.

Unwatched roots: a store opened with ``unwatched=("/root", ...)`` delivers
no change of a key under those roots to any watch, and ``watch()`` of a prefix
inside one raises ``ValueError``. They are for records written at a high rate
and only ever read by key (object storage's index): etcd then leaves them out
of its watch stream, so a broker does not receive every other broker's commits.

Counters: ``increment(key, delta)`` atomically adds ``delta >= 1`` to a durable
integer (initially 0) and returns the new value; it never returns the same
value twice, even across restarts (the basis of unique ledger ids and
producer-id blocks). Counters live in their own namespace, apart from keys.

Transactions: ``transaction(compares, writes)`` checks every
:class:`Compare` (a key's version, or that it does not exist) and, only if
all hold, applies every :class:`Put` and :class:`Delete` as one atomic step:
watchers and readers see all of it or none. If any compare fails it raises
:class:`TransactionFailed` naming every failing key and changes nothing. A
Delete of a missing key is not an error. A key may be written at most once
per transaction; at most ``MAX_TRANSACTION_OPS`` compares and as many writes,
and at most ``MAX_TRANSACTION_BYTES`` of keys and values, in every backend
(etcd's defaults: ``--max-txn-ops`` 128, ``--max-request-bytes`` 1.5 MiB);
more raises ``ValueError``. Storage's object backend commits with it.

Closing: ``close()`` closes the store's sessions (deleting their ephemeral
keys) and cancels every watch; notifications not yet delivered are dropped.
Stores are async context managers that close on exit.
"""
from __future__ import annotations

import abc
import asyncio
import enum
from dataclasses import dataclass, field
from typing import Callable


class MetadataError(Exception):
    """Base class of the store's errors."""


class BadVersion(MetadataError):
    """A compare-and-set condition did not hold; nothing was written."""


class KeyNotFound(MetadataError):
    """The key does not exist."""


class TransactionFailed(BadVersion):
    """A transaction's compares did not all hold; nothing was written.
    ``keys``: every key whose compare failed, in the order given."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(f"transaction compares failed on {', '.join(keys)}")
        self.keys = keys


class SessionExpired(MetadataError):
    """The session is closed or expired; its ephemeral keys are gone."""


@dataclass(frozen=True)
class Record:
    key: str
    value: bytes
    version: int
    ephemeral: bool = False


class EventType(enum.Enum):
    CREATED = "created"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True)
class Notification:
    type: EventType
    key: str
    #: The key's version after the change (numbered as ``Record.version``);
    #: None for a deletion. Left out of equality: a notification names
    #: the change, the version lets a writer tell its own write's echo
    #: from someone else's (``ledger_record.ManagedLedgerRecord.watch``).
    version: int | None = field(default=None, compare=False)


class Watch:
    """Handle returned by :meth:`MetadataStore.watch`; ``cancel()`` stops it."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self._cancel = cancel

    def cancel(self) -> None:
        self._cancel()


class MetadataSession(abc.ABC):
    """A liveness lease. Ephemeral keys written under it vanish with it.

    Subclasses call ``super().__init__()`` and ``_mark_ended(expired=...)``
    once, when the session closes or is lost.
    """

    id: str

    def __init__(self) -> None:
        self.expired = False  # True once the session was lost rather than closed
        self._end_event = asyncio.Event()
        self._end_callbacks: list[Callable[["MetadataSession"], None]] = []

    def on_end(self, callback: Callable[["MetadataSession"], None]) -> None:
        """Call ``callback(session)`` once when the session ends (soon, if it already has).

        Callbacks run on the event loop and must not block; an exception in
        one goes to the loop's exception handler.
        """
        if self._end_event.is_set():
            asyncio.get_running_loop().call_soon(callback, self)
        else:
            self._end_callbacks.append(callback)

    async def wait_ended(self) -> None:
        """Return once the session is closed or lost."""
        await self._end_event.wait()

    def _mark_ended(self, *, expired: bool) -> None:
        if self._end_event.is_set():
            return
        self.expired = expired
        self._end_event.set()
        callbacks, self._end_callbacks = self._end_callbacks, []
        loop = asyncio.get_running_loop()
        for callback in callbacks:
            loop.call_soon(callback, self)

    @abc.abstractmethod
    async def close(self) -> None:
        """End the session now, deleting its ephemeral keys."""

    @property
    @abc.abstractmethod
    def alive(self) -> bool:
        """False once the session is closed or has expired."""


MAX_TRANSACTION_OPS = 128
#: etcd's 1.5 MiB request cap less room for the request's own framing.
MAX_TRANSACTION_BYTES = 1536 * 1024 - 16 * 1024


@dataclass(frozen=True)
class Compare:
    """Holds when ``key`` is at ``version`` (``-1``: when it does not exist)."""

    key: str
    version: int


@dataclass(frozen=True)
class Put:
    key: str
    value: bytes


@dataclass(frozen=True)
class Delete:
    """Delete ``key`` if it exists."""

    key: str


def check_transaction(compares, writes) -> tuple[list[Compare], list]:
    """Validate a transaction's parts (ValueError/TypeError); return them as lists."""
    compares, writes = list(compares), list(writes)
    if len(compares) > MAX_TRANSACTION_OPS or len(writes) > MAX_TRANSACTION_OPS:
        raise ValueError(f"a transaction takes at most {MAX_TRANSACTION_OPS} compares and as many writes; "
                         f"got {len(compares)} and {len(writes)}")
    size = 0
    for c in compares:
        if not isinstance(c, Compare):
            raise TypeError(f"compares must be Compare; got {c!r}")
        check_key(c.key)
        if isinstance(c.version, bool) or not isinstance(c.version, int) or c.version < -1:
            raise ValueError(f"compare version must be -1 or >= 0; got {c.version!r}")
        size += len(c.key)
    seen = set()
    for w in writes:
        if not isinstance(w, (Put, Delete)):
            raise TypeError(f"writes must be Put or Delete; got {w!r}")
        check_key(w.key)
        if w.key in seen:
            raise ValueError(f"{w.key} is written twice in one transaction")
        seen.add(w.key)
        size += len(w.key)
        if isinstance(w, Put):
            size += len(check_value(w.value))
    if size > MAX_TRANSACTION_BYTES:
        raise ValueError(f"a transaction of {size} bytes is over the {MAX_TRANSACTION_BYTES} bytes limit")
    return compares, writes


def parent_of(key: str) -> str:
    head, _, _ = key.rstrip("/").rpartition("/")
    return head or "/"


def check_key(key: str) -> None:
    """Raise ValueError unless ``key`` is an absolute ``/a/b`` path."""
    if (
        not isinstance(key, str)
        or not key.startswith("/")
        or "//" in key
        or (len(key) > 1 and key.endswith("/"))
        or "\x00" in key
    ):
        raise ValueError(f"invalid metadata key {key!r}: keys are absolute '/a/b' paths")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"invalid metadata key {key!r}: not encodable as UTF-8") from None


def check_expected_version(expected_version: int | None) -> None:
    """Raise ValueError unless ``expected_version`` is None, -1 or a version >= 0."""
    if expected_version is None:
        return
    if not isinstance(expected_version, int) or isinstance(expected_version, bool) or expected_version < -1:
        raise ValueError(f"expected_version must be None, -1 or >= 0, not {expected_version!r}")


def check_value(value: bytes | bytearray | memoryview) -> bytes:
    """The value as immutable bytes. TypeError for anything not bytes-like.

    ``bytes(5)`` would silently store five zero bytes, so ints are refused.
    """
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"metadata values are bytes, not {type(value).__name__}")
    return bytes(value)


def check_delta(delta: int) -> None:
    """Raise ValueError unless ``delta >= 1``: a counter must never repeat a value."""
    if not isinstance(delta, int) or isinstance(delta, bool) or delta < 1:
        raise ValueError(f"counter delta must be an int >= 1, not {delta!r}")


def key_matches(prefix: str, key: str) -> bool:
    """True if ``key`` is ``prefix`` or lies below it."""
    return key == prefix or key.startswith(prefix.rstrip("/") + "/")


class MetadataStore(abc.ABC):
    """Abstract store; see the module docstring for the contract."""

    @abc.abstractmethod
    async def get(self, key: str) -> Record | None:
        """The record at ``key``, or None."""

    @abc.abstractmethod
    async def put(
        self,
        key: str,
        value: bytes,
        expected_version: int | None = None,
        *,
        session: MetadataSession | None = None,
    ) -> int:
        """Write ``value``; return the new version. See module doc for conditions.

        Raises ValueError (bad key or expected_version), TypeError (value not
        bytes), SessionExpired, BadVersion or KeyNotFound; nothing is written then.
        """

    @abc.abstractmethod
    async def delete(self, key: str, expected_version: int | None = None) -> None:
        """Delete ``key``. Raises KeyNotFound if missing, BadVersion on mismatch."""

    @abc.abstractmethod
    async def children(self, key: str) -> list[str]:
        """Sorted names (last path segment) of the keys directly below ``key``.

        A child counts if any key exists at or below ``key/name``.
        """

    @abc.abstractmethod
    async def increment(self, key: str, delta: int = 1) -> int:
        """Atomically add ``delta`` (>= 1, else ValueError) to the durable counter
        ``key``; return the new value. The first call on a key returns ``delta``."""

    @abc.abstractmethod
    async def transaction(self, compares: "list[Compare]", writes: "list[Put | Delete]", *,
                          versions: bool = True) -> list[int | None]:
        """Apply ``writes`` atomically if every compare holds (module doc,
        "Transactions"); return each write's new version (None for a
        Delete; None for every write with ``versions=False``, which spares
        etcd reading each put back: half the operations). Raises
        TransactionFailed (nothing written), ValueError or TypeError for a
        malformed transaction, MetadataError if the store fails (for etcd
        unreachable: it may or may not have happened)."""

    @abc.abstractmethod
    def watch(self, prefix: str, callback: Callable[[Notification], None]) -> Watch:
        """Call ``callback`` for every change of a key equal to or below ``prefix``."""

    @abc.abstractmethod
    async def create_session(self, ttl_s: float = 10.0) -> MetadataSession:
        """Start a session kept alive by the store until closed or ``ttl_s`` without keepalive.

        ``ttl_s`` must be > 0 (ValueError).
        """

    @abc.abstractmethod
    async def close(self) -> None:
        """Release resources; ephemeral keys of this store's sessions are deleted."""

    async def exists(self, key: str) -> bool:
        return (await self.get(key)) is not None

    async def children_records(self, key: str, start: str = "", limit: int = 64) -> list[Record]:
        """The records of ``key``'s children named ``start`` or after (names
        compared as strings), in name order, at most ``limit`` (>= 1): one
        page of a scan of many small records, such as object storage's
        commit records. A child with keys only below it (no record of its
        own) is left out. Here a ``children`` listing and a ``get`` per
        child; a store that reads a key range in one request (etcd) does so.
        Pages of a scan are not one snapshot: keys written meanwhile may or
        may not be in a later page."""
        check_key(key)
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit!r}")
        base = key.rstrip("/")
        names = [n for n in await self.children(key) if n >= start]
        found: list[Record] = []
        while names and len(found) < limit:
            batch, names = names[:limit - len(found)], names[limit - len(found):]
            found += [r for r in await asyncio.gather(*(self.get(f"{base}/{n}") for n in batch)) if r is not None]
        return found

    async def keys_below(self, key: str) -> list[str]:
        """Every key below ``key`` (not ``key`` itself), as its path from
        ``key`` (``"a/b"`` for ``key/a/b``), sorted: keys only, no values,
        for a scan that needs only which keys exist (the collector's of
        object storage's ledgers). Here a ``children`` listing and a ``get``
        per key; a store that reads a key range without values in one
        request (etcd) does so. Keys written meanwhile may or may not be
        listed."""
        check_key(key)
        base = key.rstrip("/")
        found: list[str] = []

        async def walk(at: str, path: str) -> None:
            for name in await self.children(at or "/"):
                if await self.get(f"{at}/{name}") is not None:
                    found.append(path + name)
                await walk(f"{at}/{name}", f"{path}{name}/")

        await walk(base, "")
        return sorted(found)

    async def __aenter__(self) -> "MetadataStore":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
