"""One commit's batches grouped by ledger, as columns (:class:`CommitGroups`),
and telling a batch its outcome once (:func:`tell_batch`).

A batch is its index in the commit's three columns (its ledger, entries,
callback); a group, a ledger's batches of the commit in submission order,
is its index in the group columns. :mod:`.commit` fills them and tells the
outcomes. A callback that raises is logged and does not stop the others.
"""
from __future__ import annotations

import logging

from ..errors import StorageError
from .commit_records import encode_row
from .index import Section, new_section
from .object_ledger import ObjectLedger

log = logging.getLogger(__name__)


class CommitGroups:
    """One commit's batches by ledger, as columns: a batch is its index in
    the commit's three columns (its ledger, entries, callback), and a group
    (a ledger's batches of the commit, in submission order) its index in
    the group columns. No object per batch nor per ledger: at 10,000 written
    topics a commit holds about 10,000 of each, alive until its receipts, and
    an object each was that many more for every collection of the garbage
    collector to walk (docs/object-storage.md)."""

    __slots__ = ("callbacks", "index", "ledgers", "heads", "more", "datas", "firsts", "counts", "offsets",
                 "lengths", "framed", "sections")

    def __init__(self, callbacks: list) -> None:
        self.callbacks = callbacks  # per batch; None once told (a batch is told once)
        self.index: dict[int, int] = {}  # ledger id -> group
        self.ledgers: list[ObjectLedger] = []  # per group, then its head batch, its later batches (or None)
        self.heads: list[int] = []
        self.more: list[list[int] | None] = []
        self.datas: list = []  # per group: its entries, all batches'
        # Per group, once placed: its section's first entry, entries, offset
        # in the object, length and framed bytes.
        self.firsts: list[int] = []
        self.counts: list[int] = []
        self.offsets: list[int] = []
        self.lengths: list[int] = []
        self.framed: list[bytes] = []
        #: Group -> its Section, for format-1 ledgers only (their records
        #: encode one); format 2 records rows made from the columns above.
        self.sections: dict[int, Section] = {}

    def add(self, ledger: ObjectLedger, batch: int, datas) -> None:
        """Batch ``batch`` (of ``ledger``, with ``datas``) joins its ledger's group."""
        g = self.index.get(ledger.ledger_id)
        if g is None:
            self.index[ledger.ledger_id] = len(self.ledgers)
            self.ledgers.append(ledger)
            self.heads.append(batch)
            self.more.append(None)
            self.datas.append(datas)
            return
        more = self.more[g]
        if more is None:
            self.more[g] = more = []
            self.datas[g] = list(self.datas[g])
        more.append(batch)
        self.datas[g].extend(datas)

    def split(self, key: str, *, chained: bool) -> tuple[list[int], dict[int, tuple]]:
        """The ledgers still to record in object ``key``, by layout: format-1
        ids (each given its Section in :attr:`sections`) and, per writer
        (``id(writer) -> (writer, ids, rows)``), format-2 ids and rows.

        A ledger whose earlier commit failed or was fenced fails here (it
        must not record a section after it). Unchained, every earlier
        commit has ended, so a ledger's section must begin at its entry
        count; ``chained``, earlier sections may still be unanswered, and
        the chain's compare stands for that check (:mod:`.commit_chain`)."""
        per_ledger: list[int] = []
        writers: dict[int, tuple] = {}
        last_writer, of_ids, of_rows = None, None, None  # most ledgers share the backend's one writer
        sections, firsts, counts, offsets, lengths = self.sections, self.firsts, self.counts, self.offsets, self.lengths
        for g, ledger in enumerate(self.ledgers):
            lid = ledger.ledger_id
            first = firsts[g]
            if ledger.error is None and not chained and first != ledger.entry_count:
                ledger.error = StorageError(f"ledger {lid}: an earlier commit did not record entries "
                                            f"{ledger.entry_count}..{first - 1}")
            if ledger.error is not None:
                self.tell(g, ledger.error)
                continue
            writer = ledger.writer
            if writer is None:
                per_ledger.append(lid)
                sections[g] = new_section(first, counts[g], key, offsets[g], lengths[g])
                continue
            if writer is not last_writer:
                last_writer = writer
                _, of_ids, of_rows = writers.setdefault(id(writer), (writer, [], []))
            of_ids.append(lid)
            of_rows.append(encode_row(lid, first, counts[g], offsets[g], lengths[g]))
        return per_ledger, writers

    def tell(self, g: int, error: BaseException | None) -> None:
        """Tell group ``g``'s batches their outcome (each once), in order."""
        tell_batch(self.callbacks, self.heads[g], error)
        more = self.more[g]
        if more is not None:
            for batch in more:
                tell_batch(self.callbacks, batch, error)

    def fail(self, lid: int, error: BaseException) -> None:
        """Ledger ``lid``'s batches of the commit fail with ``error``, and so does the ledger."""
        g = self.index[lid]
        self.ledgers[g].error = error
        self.tell(g, error)


def tell_batch(callbacks: list, batch: int, error: BaseException | None) -> None:
    """Tell batch ``batch`` (its index in ``callbacks``) its outcome, once
    (a batch already told is skipped)."""
    callback = callbacks[batch]
    if callback is None:
        return
    callbacks[batch] = None
    try:
        callback(error)
    except Exception:
        log.exception("a commit's callback failed")
