"""An object-storage ledger as its writer and readers hold it: its sections
(where its committed entries are), its counts, and whether it should roll
over (:class:`ObjectLedger`, the object backend's
:class:`~..backend.LedgerHandle`).

The committer (:mod:`.commit`) appends a section per commit that carried
the ledger's entries, in entry order, to its columns (:mod:`.section_columns`:
no object per section); the backend reads by them. A ledger
holding ``MAX_SECTIONS_PER_LEDGER`` sections is ``full`` (the managed ledger
rolls to a new ledger: it bounds an open ledger's index records), and
``PREPARE_AHEAD_SECTIONS`` before that it is ``nearly_full`` (the next
ledger is created ahead). A ledger that failed or was fenced holds its
``error`` and refuses further batches.
"""
from __future__ import annotations

import asyncio

from ..errors import LedgerFencedError, StorageError
from .index import Section
from .kept_sections import KeptSections
from .section_columns import SectionColumns
from .writer_fence import WriterFence

#: A ledger holding this many sections asks to be rolled over (``full``):
#: it bounds the open ledger's index records (sealed ones are compacted).
#: The default of ``object_sections_per_ledger`` (storage/config.py).
MAX_SECTIONS_PER_LEDGER = 1000
#: This many sections before ``full`` (at most half of it), the managed
#: ledger creates its next ledger ahead (``nearly_full``), so that the
#: rollover switches appends to it instead of holding them.
PREPARE_AHEAD_SECTIONS = 100


class ObjectLedger:
    """A ledger of the object backend (a :class:`~..backend.LedgerHandle`).

    ``entry_count``/``size`` count committed entries; ``sections`` says
    where they are. ``epoch`` is the ledger record's version this writer
    holds (None: opened only to read)."""

    def __init__(self, ledger_id: int, epoch: int | None, sections: list[Section] | None = None,
                 max_sections: int | None = None) -> None:
        self.ledger_id = ledger_id
        #: Sections at which it is ``full`` (its backend's ``sections_per_ledger``;
        #: None: ``MAX_SECTIONS_PER_LEDGER``), and at which ``nearly_full``.
        self.max_sections = MAX_SECTIONS_PER_LEDGER if max_sections is None else max_sections
        self.prepare_at = self.max_sections - min(PREPARE_AHEAD_SECTIONS, self.max_sections // 2)
        self.epoch = epoch
        #: The index, as columns (no object per section: see .section_columns).
        self.sections = SectionColumns(sections or ())
        #: Its first entry ids (the same array), for ``bisect``.
        self.firsts = self.sections.firsts
        #: Enough sections: the managed ledger should roll to a new ledger
        #: (``LedgerHandle.full``). Plain attributes, set when the sections
        #: change (:meth:`update_fullness`), not computed per read: the append path
        #: reads them after every completed batch.
        self.full = False
        #: ``full`` is near: the managed ledger creates the next ledger ahead.
        self.nearly_full = False
        self.update_fullness()
        self.entry_count = self.sections.end()
        self.size = self.sections.total_length()
        self.placed = self.entry_count  # entries in objects, committed or in a commit under way
        self.error: StorageError | None = None  # set: refuses further batches
        self.idle: asyncio.Event | None = None  # set when nothing of it is pending
        self.pending = 0  # its batches queued or committing (the committer counts them)
        self.compacted = False  # sections are per-ledger chunks
        self.gather_s = 0.0  # how long its batches may wait for others (its storage profile)
        #: What its backend keeps of it for its compaction, dropped when it
        #: closes (a reference, not a closure per ledger: four objects each
        #: for the collector at 10,000 written topics).
        self.kept: KeptSections | None = None
        #: Layout format 2: the writer fence its commits compare (None: format 1, or only read).
        self.writer: WriterFence | None = None

    def use(self, sections: list[Section], *, compacted: bool) -> None:
        """Read from ``sections`` from now on (a sealed ledger's new chunks)."""
        self.sections = SectionColumns(sections)
        self.firsts = self.sections.firsts
        self.compacted = compacted
        self.update_fullness()

    def update_fullness(self) -> None:
        """Set ``full`` and ``nearly_full`` from the sections held now."""
        held = len(self.sections)
        self.full = held >= self.max_sections
        self.nearly_full = held >= self.prepare_at

    def fence(self) -> None:
        if self.error is None:
            self.error = LedgerFencedError(f"ledger {self.ledger_id} takes no more writes")

    def close(self) -> None:
        # Sections are metadata and the bytes are in objects; what the backend
        # kept for its compaction goes (a ledger taken over is never sealed here).
        kept, self.kept = self.kept, None
        if kept is not None:
            kept.drop(self.ledger_id)

    def _committed(self, section: Section) -> None:
        sections = self.sections
        sections.append(section)
        self.entry_count = section.first + section.count
        self.size += section.length
        if len(sections) >= self.prepare_at:  # below it, neither changes
            self.update_fullness()
