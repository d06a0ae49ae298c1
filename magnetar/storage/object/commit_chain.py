"""Commit transactions chained: a commit's transaction is sent while the
one before it is still unanswered, on the condition that the one before
landed.

Why: the committer's transactions used to run strictly one after another,
so a commit waited for the previous commit's answer to be read by the
event loop before sending its own. When the loop lagged, that wait grew,
commits came fewer and larger, and larger commits made the loop lag more
(docs/object-storage.md, "Chained commit transactions"). Chained, the wait
is for the previous transaction to be *sent*.

How (format-2 commits of one record, the usual case):

- Commit N tells its :class:`CommitLink` the key of the commit record its
  first transaction puts, as it sends it (:meth:`CommitLink.tell_sent`).
- Commit N+1, once its PUT is done, waits for that (:func:`follow`), then
  sends its own transaction comparing, besides its writer's fence, that
  record N exists at its first version (:func:`chained_record`). So record
  N+1 lands only if record N did, and by induction every record chained
  before it: a ledger's sections in the records never have a gap.
- N+1's receipts still wait for N's (commit order: a ledger's batches
  complete in submission order, and its entry count only grows).

Failure cases:

- N+1's transaction reaches the store before N's (two calls on one
  channel may be applied in either order; at 10,000 written topics a
  version that then waited for N to end made 44 % more transactions than
  commits): its compare fails, nothing of it was written, and it goes
  again with the same record key as soon as N's is known to have landed
  (``CommitLink.answered``), so a commit chained on N+1 needs no retry.
- N's transaction fails its compare (a ledger of the writer was fenced):
  N+1's fails too, and N+1 falls back to the unchained path once N has
  ended (:class:`~.commit.Committer` re-checks every ledger then).
- N's outcome is unknown (the store did not answer): N's ledgers fail
  (no receipt) as before. N+1 may still land, and if it does, so did N; its
  ledgers that were in N are failed at its receipts all the same, with N's
  error, rather than acknowledged past a section this broker never
  counted.
- A commit that is not one format-2 record (format-1 ledgers, more than
  ``RECORD_LEDGERS`` ledgers, a fenced ledger to refuse first, a dead
  writer) tells ``None``: the next one waits for it to end, as before.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from ...metadata.store import Compare, MetadataStore, Put, TransactionFailed
from .commit_records import encode_rows, record_key
from .writer_fence import WriterFence


class CommitLink:
    """One commit's place in the chain: ``sent`` resolves with the key of
    the record its chained transaction puts (``None``: it sent none that a
    later one may compare), ``answered`` with whether that record landed
    (``False`` also when it failed or its outcome is unknown), ``ended``
    once the commit is over (its receipts told, never before the previous
    commit's ``ended``)."""

    __slots__ = ("sent", "answered", "ended")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sent: asyncio.Future = loop.create_future()
        self.answered: asyncio.Future = loop.create_future()
        self.ended: asyncio.Future = loop.create_future()

    def tell_sent(self, key: str | None) -> None:
        if not self.sent.done():
            self.sent.set_result(key)

    def tell_answered(self, landed: bool) -> None:
        if not self.answered.done():
            self.answered.set_result(landed)


async def follow(previous: CommitLink | None) -> str | None:
    """Wait until the previous commit has sent its transaction or ended.

    Returns the record key the next transaction must compare (the previous
    commit is still unanswered), or ``None`` once every earlier commit has
    ended (nothing to compare: the unchained checks hold)."""
    if previous is None or previous.ended.done():
        return None
    key = await asyncio.shield(previous.sent)
    answered = previous.answered
    if key is None or (answered.done() and not answered.result()):  # nothing to chain on
        await asyncio.shield(previous.ended)
        return None
    return None if previous.ended.done() else key


def can_chain(fence: WriterFence, ids: list[int], max_ledgers: int) -> bool:
    """Whether ``ids`` go in one chained record of ``fence``'s writer: a live
    writer, no ledger it must refuse (the unchained path does that), one
    record's worth."""
    return not fence.dead and len(ids) <= max_ledgers and (not fence.fenced or fence.fenced.isdisjoint(ids))


async def chained_record(store: MetadataStore, fence: WriterFence, key: str, rows: list[bytes],
                         after: str | None, previous: CommitLink | None, link: CommitLink,
                         count: Callable[[], None] = lambda: None) -> bool:
    """Put one commit record of ``fence``'s writer naming object ``key``
    (``rows``: its ledgers' sections), comparing the writer's fence and, if
    ``after`` is given, that record ``after`` (``previous``'s) exists as
    first written. Tells ``link`` the record's key as the transaction goes
    out, and whether it landed once answered.

    Two calls on one channel may be applied in either order, so a
    transaction may fail only because it overtook the previous one: then it
    goes again, once, with the same record key, as soon as the previous
    one is known to have landed (a later commit chained on this record
    needs no retry then). Returns whether it had to.

    ``count`` is called per transaction tried. ``TransactionFailed`` if a
    compare failed otherwise (nothing written),
    ``MetadataError``/``ValueError`` if the outcome is unknown."""
    record = record_key(fence.writer, fence.take_seq())
    compares = fence.compares()
    if after is not None:
        compares.append(Compare(after, 0))  # written once, by its own commit; rewritten only when old
    writes = [Put(record, encode_rows(key, rows))]
    link.tell_sent(record)
    again = False
    try:
        count()
        await store.transaction(compares, writes, versions=False)
    except TransactionFailed as exc:
        if after is None or list(exc.keys) != [after] or not await asyncio.shield(previous.answered):
            raise
        again = True
        count()
        await store.transaction(compares, writes, versions=False)
    link.tell_answered(True)
    return again
