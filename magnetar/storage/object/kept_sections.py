"""The framed bytes of the sections a writer committed, kept in memory for
its ledger's compaction once it is sealed.

A sealed ledger is rewritten into chunk objects (:mod:`.compactor`). Read
back from the store, a ledger of a lone busy topic costs one ranged GET
per section (each commit object is its own), up to a thousand GETs and
their event-loop work in a burst right after every rollover: that burst
was a ``latency`` topic's publish tail (issue 41). The writer has had those
bytes in hand when it wrote them, so it keeps them here, per ledger, and
its compaction takes them instead of reading the store.

Bounds: ``ledger_max_bytes`` per ledger and ``max_bytes`` in all; a ledger
that would pass either gives up its bytes (its compaction reads the store,
as a recovered ledger's does), so memory stays bounded whatever the number
of topics. Only a ledger this writer created (``start``) is kept, from
entry 0; :meth:`take` hands the bytes over once, if they are complete.
The backend drops a ledger's bytes when it is deleted, when a commit of it
failed, and when its handle closes unsealed (taken over by a new owner).
No I/O.

The seam: :class:`SectionKeeper` is what the committer, the backend and
the compactions ask of a keeper; :class:`KeptSections` (here, memory) is
one, :class:`~.spilled_sections.SpilledSections` (a broker's data
directory: every ledger's bytes, no memory per section) the other. The
backend's wiring chooses (``object_spill_max_bytes``).
"""
from __future__ import annotations

from typing import Protocol, Sequence

from .section_columns import SectionColumns


class SealedLedger(Protocol):
    """What a keeper reads of a sealed ledger (an ``ObjectLedger``)."""

    ledger_id: int
    sections: SectionColumns
    size: int

#: Bytes kept in all, per backend (broker).
KEEP_BYTES = 16 * 1024 * 1024
#: Bytes kept per ledger: a chunk's worth (larger ledgers are compacted from GETs of large sections).
LEDGER_KEEP_BYTES = 4 * 1024 * 1024


class KeptBytes(Protocol):
    """A sealed ledger's kept bytes, handed to its compaction."""

    async def parts(self) -> "Sequence[bytes] | None":
        """The framed bytes of each of the ledger's sections, in order (an
        item per section; a slice is a list of bytes-like objects that
        join to those sections' bytes, not necessarily one per section),
        or None if they cannot be had whole (its compaction reads the store
        or indexes the ledger instead). Never raises for a missing or
        damaged copy."""


class SectionKeeper(Protocol):
    """Where a writer keeps the bytes of the sections it committed, for the
    compaction of its ledgers once sealed. Only a ledger ``start``-ed here is
    kept; a commit never waits for a keeper, and a keeper's failure never
    fails a commit (it keeps less)."""

    #: Whether :meth:`add` wants each committed section (the committer skips the call if not).
    per_section: bool
    #: Bytes kept now (at /metrics).
    bytes: int

    def start(self, ledger_id: int) -> None:
        """Keep the sections of a ledger just created (none committed yet)."""

    def wrote(self, key: str, blob: bytes) -> None:
        """Commit object ``key`` was written with ``blob`` (every ledger's section in it)."""

    def add(self, ledger_id: int, framed: bytes) -> None:
        """The ledger's next section was committed with these bytes."""

    def take(self, ledger: SealedLedger) -> KeptBytes | None:
        """The sealed ``ledger``'s bytes, if kept (once: nothing is kept for it afterwards)."""

    def drop(self, ledger_id: int) -> None:
        """Keep nothing more of the ledger (deleted, failed, taken over)."""

    def clear(self) -> None:
        """Keep nothing (the backend closes)."""


class _Ready:
    """Bytes in hand (:class:`KeptBytes`)."""

    __slots__ = ("_parts",)

    def __init__(self, parts: list[bytes]) -> None:
        self._parts = parts

    async def parts(self) -> list[bytes] | None:
        return self._parts


class KeptSections:
    """The keeper in memory (:class:`SectionKeeper`; the module docstring)."""

    per_section = True

    def __init__(self, max_bytes: int = KEEP_BYTES, ledger_max_bytes: int = LEDGER_KEEP_BYTES) -> None:
        self.max_bytes = max_bytes
        self.ledger_max_bytes = ledger_max_bytes
        self.bytes = 0  # kept in all
        #: ledger id -> [bytes kept, framed bytes of each committed section in order...]:
        #: one dict lookup per committed section (``add`` runs per ledger per commit).
        self._kept: dict[int, list] = {}

    def start(self, ledger_id: int) -> None:
        """Keep the sections of a ledger just created (none committed yet)."""
        self.drop(ledger_id)
        self._kept[ledger_id] = [0]

    def wrote(self, key: str, blob: bytes) -> None:
        pass  # kept per section (add)

    def add(self, ledger_id: int, framed: bytes) -> None:
        """The ledger's next section was committed with these bytes."""
        kept = self._kept.get(ledger_id)
        if kept is None:
            return
        n = len(framed)
        size = kept[0] + n
        if size > self.ledger_max_bytes or self.bytes + n > self.max_bytes:
            self.drop(ledger_id)  # its compaction reads the store
            return
        kept.append(framed)
        kept[0] = size
        self.bytes += n

    def take(self, ledger: SealedLedger) -> KeptBytes | None:
        parts = self.take_parts(ledger.ledger_id, len(ledger.sections))
        return None if parts is None else _Ready(parts)

    def take_parts(self, ledger_id: int, sections: int) -> list[bytes] | None:
        """The ledger's kept bytes, one item per section, if all ``sections``
        are there (else None); either way nothing is kept for it afterwards."""
        kept = self._kept.get(ledger_id)
        self.drop(ledger_id)
        return kept[1:] if kept is not None and len(kept) - 1 == sections else None

    def drop(self, ledger_id: int) -> None:
        """Keep nothing more of the ledger (deleted, failed, or past a bound)."""
        kept = self._kept.pop(ledger_id, None)
        if kept is not None:
            self.bytes -= kept[0]

    def clear(self) -> None:
        self._kept.clear()
        self.bytes = 0
