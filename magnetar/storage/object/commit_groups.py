"""One commit's batches grouped by ledger, as columns (:class:`CommitGroups`),
and telling a batch its outcome once (:func:`tell_batch`).

A batch is its index in the commit's three columns (its ledger, entries,
callback); a group, a ledger's batches of the commit in submission order,
is its index in the group columns. :mod:`.commit` fills them and tells the
outcomes. A callback that raises is logged and does not stop the others.
"""
from __future__ import annotations

import logging

from .index import Section
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
