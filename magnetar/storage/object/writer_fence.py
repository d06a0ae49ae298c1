"""The fence of a format-2 ledger: one key per writer, not one per ledger.

A format-1 ledger's commit compares the ledger's own record (a compare per
ledger per commit: at 10,000 ledgers a commit that is 260 ms of etcd). A
format-2 ledger names its writer in its record, and every commit of that
writer compares two keys, whatever the number of ledgers it carries:

- ``/object-writers/<writer>``: ``{"fenced": [ledger id, ...]}``, persistent.
  A new owner's fence (or a deletion) bumps the ledger record AND this key in
  one transaction, adding the ledger's id to ``fenced``
  (:func:`fence_ledger`);
- ``/object-writers/<writer>/alive``: written once under the writer's
  metadata session (ephemeral): when the session ends (the broker died, was
  paused past its TTL, or lost etcd) the key is gone and never written again.

The writer holds both versions and the ``fenced`` set it last read
(:class:`WriterFence`). A commit's transaction compares both versions; if
either moved, nothing was written: the writer reads the key again
(:meth:`WriterFence.refresh`), refuses every ledger ``fenced`` names (no
receipt: those ledgers are fenced), takes the new version and retries the
rest. Because the compare holds only while ``fenced`` is what the writer
read, no transaction of it can ever record a section of a ledger named
there: a ledger fenced while its writer was idle is refused at its next
commit, and a writer whose ``alive`` key is gone (a zombie after its
session) never commits again (:attr:`WriterFence.dead`).

``fenced`` grows by one id per ledger of this writer fenced or deleted by
someone else, and is rewritten whole by every fence; so the writer prunes
it: once it has read :data:`PRUNE_AT` ids or more there, it keeps them in
memory (it refuses them for the rest of its life: ``WriterFence.fenced``
never shrinks) and empties the key with a compare-and-set on the version
it read (:meth:`WriterFence.refresh`). Nothing else reads the list, and a
fence landing meanwhile fails the prune's compare (its id stays; the
next refresh reads it), so no fenced ledger is ever forgotten. The key
lives until its writer's session ended and none of its commit records is
left (the collector deletes it then: :mod:`.commit_records`).

Failure modes: ``MetadataError`` from the store; ``TransactionFailed`` only
inside :func:`fence_ledgers`' own retries.
"""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Callable, Sequence

from ...metadata.store import (
    MAX_TRANSACTION_OPS, BadVersion, Compare, Delete, KeyNotFound, MetadataSession, MetadataStore, Put,
    TransactionFailed,
)

WRITERS = "/object-writers"
#: Ledgers fenced per transaction: a compare and a write each, and the writer key's.
FENCES_PER_TRANSACTION = MAX_TRANSACTION_OPS - 1
#: A writer that reads this many fenced ids in its key empties it (module
#: docstring): ~7 KB rewritten per fence at most, and one prune per this
#: many fences (each prune fails the compare of commits and fences in flight once).
PRUNE_AT = 1000


def writer_key(writer: str) -> str:
    return f"{WRITERS}/{writer}"


def alive_key(writer: str) -> str:
    return f"{WRITERS}/{writer}/alive"


def fenced_value(fenced: "set[int] | list[int]") -> bytes:
    return json.dumps({"fenced": sorted(fenced)}, separators=(",", ":")).encode()


def fenced_of(value: bytes) -> set[int]:
    return {int(i) for i in json.loads(value).get("fenced", [])}


class WriterFence:
    """One writer of format-2 ledgers: its id, the versions its commits
    compare, and the ledgers it must refuse (see the module docstring)."""

    def __init__(self, writer: str | None = None) -> None:
        self.writer = writer or uuid.uuid4().hex
        self.version: int | None = None  # of the writer key
        self.alive_version: int | None = None
        #: Every ledger id its key ever named: refused for good (the key itself is pruned).
        self.fenced: set[int] = set()
        self.dead = False  # its session ended or its key is gone: it never commits again
        #: The next commit record's number (records of ledgers created later have higher ones).
        self.next_seq = 1

    async def start(self, store: MetadataStore, session: MetadataSession) -> None:
        """Create the writer's keys (once; MetadataError, SessionExpired)."""
        # ``alive`` first: the collector deletes a writer key without one.
        self.alive_version = await store.put(alive_key(self.writer), b"{}", -1, session=session)
        self.version = await store.put(writer_key(self.writer), fenced_value([]), -1)
        session.on_end(lambda _s: self.die())

    def die(self) -> None:
        self.dead = True

    def compares(self) -> list[Compare]:
        return [Compare(writer_key(self.writer), self.version), Compare(alive_key(self.writer), self.alive_version)]

    async def refresh(self, store: MetadataStore, prune_at: int = PRUNE_AT) -> None:
        """Read the writer's keys again after a failed compare: the ids
        fenced join :attr:`fenced`; ``prune_at`` of them or more empty the
        key (module docstring). MetadataError from the store."""
        record = await store.get(writer_key(self.writer))
        alive = await store.get(alive_key(self.writer))
        if record is None or alive is None or alive.version != self.alive_version:
            self.dead = True
            return
        named = fenced_of(record.value)
        # A new set, not updated in place: a commit may hold the one it tested.
        self.fenced = self.fenced | named
        self.version = record.version
        if len(named) >= prune_at:
            try:
                self.version = await store.put(writer_key(self.writer), fenced_value([]), record.version)
            except (BadVersion, KeyNotFound):
                pass  # fenced again meanwhile (the next refresh reads it), or collected (dead: seen next)

    def take_seq(self) -> int:
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        return seq


async def fence_ledger(store: MetadataStore, ledger: str, writer: str, new_record) -> bool:
    """Fence the format-2 ledger whose record is at ``ledger`` and whose
    writer is ``writer``: :func:`fence_ledgers` for one. False if the
    ledger record does not exist. MetadataError from the store."""
    return bool(await fence_ledgers(store, [ledger], writer, new_record))


async def fence_ledgers(store: MetadataStore, ledgers: Sequence[str], writer: str,
                        new_record: Callable[[bytes], "bytes | None"]) -> set[str]:
    """Fence the format-2 ledgers whose records are at ``ledgers`` (distinct
    keys), all of writer ``writer``: in each transaction, up to
    :data:`FENCES_PER_TRANSACTION` ledger records become ``new_record(old
    value)`` (or are deleted if that is None) and the writer key names their
    ids in ``fenced``. Each transaction is retried until it holds (a ledger
    record or the writer key changed meanwhile). Returns the keys whose
    record existed; the others had nothing to fence. MetadataError from the
    store. Fences asked for at once are gathered into it by
    :class:`~.fence_batches.FenceBatches` (why: that module's docstring)."""
    fenced: set[str] = set()
    for i in range(0, len(ledgers), FENCES_PER_TRANSACTION):
        fenced |= await _fence_some(store, ledgers[i:i + FENCES_PER_TRANSACTION], writer, new_record)
    return fenced


async def _fence_some(store: MetadataStore, ledgers: Sequence[str], writer: str, new_record) -> set[str]:
    wkey = writer_key(writer)
    while True:
        records = await asyncio.gather(*(store.get(key) for key in ledgers))
        present = [(key, record) for key, record in zip(ledgers, records) if record is not None]
        if not present:
            return set()
        wrecord = await store.get(wkey)
        compares = [Compare(key, record.version) for key, record in present]
        compares.append(Compare(wkey, wrecord.version if wrecord else -1))
        writes: list = []
        if wrecord is not None:  # gone: its writer's session ended and it never commits again
            ids = {int(key.rsplit("/", 1)[-1]) for key, _ in present}
            writes.append(Put(wkey, fenced_value(fenced_of(wrecord.value) | ids)))
        for key, record in present:
            value = new_record(record.value)
            writes.append(Delete(key) if value is None else Put(key, value))
        try:
            await store.transaction(compares, writes)
            return {key for key, _ in present}
        except (TransactionFailed, BadVersion, KeyNotFound):
            continue  # the writer committed nothing meanwhile, or someone else fenced: read again
