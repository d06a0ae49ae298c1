"""The bundle state channel: who owns each bundle, in the metadata store.

One key per bundle, ``/loadbalance/bundles/<tenant>/<namespace>/<range>``,
holds ``{"state", "broker", "source"}`` as JSON; the store's version of the
key is the channel's version. States and legal transitions are Pulsar's
(PIP-192, metadata-store variant); a missing key is ``Init``::

    Init, Free  -> Assigning
    Assigning   -> Owned
    Owned       -> Releasing | Splitting
    Releasing   -> Assigning | Free
    Splitting   -> Deleted
    Deleted     -> Init

A split (Owned -> Splitting -> Deleted) leaves the Deleted record in place:
a broker whose layout copy is stale finds it and reads the layout again
(:mod:`.layout`).

Every write is a compare-and-set on the version this broker read, so of two
racing writers exactly one wins; the loser gets :class:`LostRace` and reads
again. The one exception to the transition table is :meth:`Channel.override`,
which the leader uses to take a bundle away from a broker whose session
ended (its owner can no longer release it); it is still a compare-and-set.

Every broker keeps a local table of the channel, filled at :meth:`start` and
kept current by one prefix watch; listeners hear every change. Failure modes:
metadata errors propagate from writes (the caller retries or answers
ServiceNotReady); a changed record whose read fails is read again, backing
off, until a read succeeds; a value that is not valid JSON is logged and
read as Init.
"""
from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Callable

from magnetar.metadata import MetadataStore
from magnetar.metadata.store import BadVersion, Notification, KeyNotFound

from .bundles import Bundle, parse_range
from ..topics.moving import MovingTopic

log = logging.getLogger(__name__)

ROOT = "/loadbalance/bundles"

#: Topic names an Assigning record carries at most (a few kB of the record).
MAX_NAMED_TOPICS = 128

#: A record whose read failed (the store out of reach) is read again after
#: this, doubling up to REREAD_MAX_S, until a read succeeds.
REREAD_FIRST_S = 0.1
REREAD_MAX_S = 2.0

INIT, FREE, ASSIGNING, OWNED, RELEASING, SPLITTING, DELETED = (
    "Init", "Free", "Assigning", "Owned", "Releasing", "Splitting", "Deleted")

LEGAL: dict[str, frozenset[str]] = {
    INIT: frozenset({ASSIGNING}),
    FREE: frozenset({ASSIGNING}),
    ASSIGNING: frozenset({OWNED}),
    OWNED: frozenset({RELEASING, SPLITTING}),
    RELEASING: frozenset({ASSIGNING, FREE}),
    SPLITTING: frozenset({DELETED}),
    DELETED: frozenset({INIT}),
}


class IllegalTransition(ValueError):
    """The requested state does not follow the current one."""


class LostRace(Exception):
    """Another broker wrote the bundle's record first; read it again."""


@dataclass(frozen=True)
class BundleState:
    state: str = INIT
    #: The broker the state is about (the owner, or the one being assigned).
    broker: str | None = None
    #: The previous owner during a transfer (Releasing, Assigning).
    source: str | None = None
    #: The store's version of the record; -1 when there is none.
    version: int = -1
    #: Splitting: the hash where the owner cuts the bundle in two.
    split_at: int | None = None
    #: Assigning after a release: the topics the source had loaded, which the
    #: destination loads before it takes the bundle (at most
    #: ``MAX_NAMED_TOPICS``; the others load on first use).
    topics: tuple[MovingTopic, ...] = ()

    def doc(self) -> bytes:
        doc = {"state": self.state, "broker": self.broker, "source": self.source}
        if self.split_at is not None:
            doc["split_at"] = self.split_at
        if self.topics:
            doc["topics"] = [t.doc() for t in self.topics]
        return json.dumps(doc).encode()


def key_of(bundle: Bundle) -> str:
    return f"{ROOT}/{bundle.namespace}/{bundle.range}"


def bundle_of_key(key: str) -> Bundle | None:
    rest = key[len(ROOT) + 1:].split("/")
    if len(rest) != 3:
        return None
    try:
        return parse_range(f"{rest[0]}/{rest[1]}", rest[2])
    except ValueError:
        return None


def parse_state(value: bytes, version: int) -> BundleState:
    try:
        doc = json.loads(value)
        split_at = doc.get("split_at")
        topics = doc.get("topics")
        topics = tuple(t for t in map(MovingTopic.parse, topics) if t is not None) if isinstance(topics, list) else ()
        return BundleState(doc["state"], doc.get("broker"), doc.get("source"), version,
                           split_at if isinstance(split_at, int) else None, topics)
    except (ValueError, KeyError, TypeError):
        log.warning("unreadable bundle state %r: read as Init", value[:100])
        return BundleState(version=version)


Listener = Callable[[Bundle, BundleState, BundleState], None]


class Channel:
    """One broker's view of the channel, and its writes to it."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.table: dict[Bundle, BundleState] = {}
        self._listeners: list[Listener] = []
        self._watch = None
        self._refreshing: dict[str, asyncio.Task] = {}
        #: Keys changed again while being read.
        self._stale: set[str] = set()

    async def start(self) -> None:
        """Load the whole channel and follow it. Call once, before lookups."""
        self._watch = self.store.watch(ROOT, self._on_change)
        await self.reload()

    async def reload(self) -> None:
        """Read every record again, so the table is the store's as of now
        (listeners hear each difference; a record gone from the store leaves
        the table). A broker back from a lost session calls it before it
        serves: the watch missed what changed while the store was out of
        reach, and a stale table still names it the owner of bundles another
        broker took meanwhile. Metadata errors propagate."""
        keys = set()
        for tenant in await self.store.children(ROOT):
            for ns in await self.store.children(f"{ROOT}/{tenant}"):
                for rng in await self.store.children(f"{ROOT}/{tenant}/{ns}"):
                    keys.add(f"{ROOT}/{tenant}/{ns}/{rng}")
        for key in sorted(keys):
            await self.refresh(key)
        for bundle in [b for b in self.table if key_of(b) not in keys]:
            self._apply(bundle, BundleState())

    def close(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        for task in self._refreshing.values():
            task.cancel()

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def get(self, bundle: Bundle) -> BundleState:
        return self.table.get(bundle, BundleState())

    def owned_by(self, broker: str) -> list[Bundle]:
        return [b for b, s in self.table.items() if s.state == OWNED and s.broker == broker]

    def held_by(self, broker: str) -> list[Bundle]:
        """Bundles whose state names ``broker`` (owned, being assigned to it, or releasing)."""
        return [b for b, s in self.table.items() if s.broker == broker and s.state in (ASSIGNING, OWNED, RELEASING)]

    # -- following the store ----------------------------------------------------------
    def _on_change(self, note: Notification) -> None:
        key = note.key
        if key in self._refreshing:
            # A read is on its way but may have started before this change:
            # read once more when it is done.
            self._stale.add(key)
            return
        task = asyncio.get_running_loop().create_task(self._refresh_soon(key))
        self._refreshing[key] = task

    async def _refresh_soon(self, key: str) -> None:
        backoff = REREAD_FIRST_S
        try:
            while True:
                self._stale.discard(key)
                try:
                    await self.refresh(key)
                    backoff = REREAD_FIRST_S
                except Exception as exc:
                    # Read again until it succeeds: the key may never change
                    # again, and a broker that missed "Assigning to me" would
                    # never take the bundle (the leader's in-flight timeout,
                    # 30 s, would be the only rescue).
                    log.warning("cannot read bundle state %s (%s); reading it again in %.1f s", key, exc, backoff)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, REREAD_MAX_S)
                    continue
                if key not in self._stale:
                    return
        finally:
            self._refreshing.pop(key, None)

    async def refresh(self, key: str) -> BundleState | None:
        """Read one record into the table (and tell listeners if it changed)."""
        bundle = bundle_of_key(key)
        if bundle is None:
            return None
        record = await self.store.get(key)
        new = BundleState() if record is None else parse_state(record.value, record.version)
        self._apply(bundle, new)
        return new

    def _apply(self, bundle: Bundle, new: BundleState) -> None:
        old = self.table.get(bundle, BundleState())
        if new.version != -1 and old.version > new.version:
            return  # an older read finished after a newer one
        if new.version == -1:
            self.table.pop(bundle, None)
        else:
            self.table[bundle] = new
        if old != new:
            for listener in list(self._listeners):
                try:
                    listener(bundle, old, new)
                except Exception:
                    log.exception("bundle listener failed on %s", bundle)

    # -- writing ----------------------------------------------------------------------
    async def transition(self, bundle: Bundle, to: str, broker: str | None, source: str | None = None,
                         *, expected: BundleState | None = None, split_at: int | None = None,
                         topics: tuple[MovingTopic, ...] = ()) -> BundleState:
        """Move ``bundle`` from ``expected`` (default: the table's state) to ``to``
        (``topics``: see :attr:`BundleState.topics`).

        Raises IllegalTransition if ``to`` does not follow the expected state,
        LostRace if the record changed since (the table is refreshed then).
        """
        current = self.get(bundle) if expected is None else expected
        if to not in LEGAL[current.state]:
            raise IllegalTransition(f"bundle {bundle}: {current.state} -> {to} is not a legal transition")
        return await self._write(bundle, BundleState(to, broker, source, split_at=split_at,
                                                     topics=tuple(topics[:MAX_NAMED_TOPICS])), current.version)

    async def override(self, bundle: Bundle, to: str, broker: str | None, source: str | None,
                       expected: BundleState) -> BundleState:
        """The leader's cleanup write: any state -> ``to``, still compare-and-set."""
        return await self._write(bundle, BundleState(to, broker, source), expected.version)

    async def _write(self, bundle: Bundle, state: BundleState, version: int) -> BundleState:
        key = key_of(bundle)
        try:
            new_version = await self.store.put(key, state.doc(), version)
        except (BadVersion, KeyNotFound):
            await self.refresh(key)
            raise LostRace(f"bundle {bundle} changed under us") from None
        written = BundleState(state.state, state.broker, state.source, new_version, state.split_at, state.topics)
        self._apply(bundle, written)
        return written

    async def wait_for(self, bundle: Bundle, predicate: Callable[[BundleState], bool],
                       timeout: float) -> BundleState:
        """The bundle's state once ``predicate`` holds; TimeoutError after ``timeout`` s."""
        state = self.get(bundle)
        if predicate(state):
            return state
        fut: asyncio.Future = asyncio.get_running_loop().create_future()

        def listener(b: Bundle, old: BundleState, new: BundleState) -> None:
            if b == bundle and predicate(new) and not fut.done():
                fut.set_result(new)

        self._listeners.append(listener)
        try:
            # A change may have landed between the check and the listener.
            await self.refresh(key_of(bundle))
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._listeners.remove(listener)
