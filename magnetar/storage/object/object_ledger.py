"""An object-storage ledger as its writer and readers hold it: its sections
(where its committed entries are), its counts, and whether it should roll
over (:class:`ObjectLedger`, the object backend's
:class:`~..backend.LedgerHandle`).

The committer (:mod:`.commit`) appends a section per commit that carried
the ledger's entries, in entry order, to its columns (:mod:`.section_columns`:
no object per section); the backend reads by them. A ledger holding
``max_sections`` sections is ``full`` (the managed ledger rolls to a new
ledger: it bounds an open ledger's index records), and
``PREPARE_AHEAD_SECTIONS`` before that (at most half of it) it is
``nearly_full`` (the next ledger is created ahead). A ledger that failed
or was fenced holds its ``error`` and refuses further batches.

**Spread**: a ledger its writer creates gets its own ``max_sections``,
drawn by :func:`draw_max_sections` between ``1 - ROLLOVER_SPREAD`` of the
backend's maximum (``object_sections_per_ledger``) and the maximum. Topics
written evenly fill their ledgers at the same pace: with one bound for
all, 10,000 of them rolled over (a ledger created, one sealed and
compacted each) within the same few seconds, and again every time they
filled up. Drawn per ledger, their rollovers spread over a ``ROLLOVER_SPREAD``
share of a ledger's lifetime, and further apart at each generation (each
draws anew). The open index stays bounded by the maximum.
"""
from __future__ import annotations

import asyncio
import math
import random

from ..errors import LedgerFencedError, StorageError
from .index import Section
from .kept_sections import SectionKeeper
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
#: A new ledger's ``max_sections`` is drawn from the top ``ROLLOVER_SPREAD``
#: share of the maximum (see the module docstring). Its cost: ledgers hold
#: 3/4 of the maximum on average, a third more rollovers than at the
#: maximum; 0 rolls every ledger at the maximum.
ROLLOVER_SPREAD = 0.5


def draw_max_sections(maximum: int, rng: random.Random | None = None) -> int:
    """A new ledger's ``max_sections``: uniform over the integers from
    ``maximum * (1 - ROLLOVER_SPREAD)`` (rounded up, at least 1) to
    ``maximum``, both in. ``rng``: where it draws (None: ``random``)."""
    low = max(1, math.ceil(maximum * (1 - ROLLOVER_SPREAD)))
    return (rng or random).randint(min(low, maximum), maximum)


class ObjectLedger:
    """A ledger of the object backend (a :class:`~..backend.LedgerHandle`).

    ``entry_count``/``size`` count committed entries; ``sections`` says
    where they are. ``epoch`` is the ledger record's version this writer
    holds (None: opened only to read)."""

    def __init__(self, ledger_id: int, epoch: int | None, sections: list[Section] | None = None,
                 max_sections: int | None = None) -> None:
        self.ledger_id = ledger_id
        #: Sections at which it is ``full`` (drawn by its writer's backend:
        #: :func:`draw_max_sections`; None: ``MAX_SECTIONS_PER_LEDGER``, as a
        #: ledger opened to read or recover has), and at which ``nearly_full``.
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
        #: Sealed by its writer with every commit of it successful: its
        #: sections are its index while the ledger record is at ``epoch``
        #: (its compaction reads neither the index nor, with kept bytes, the store).
        self.sealed_whole = False
        self.gather_s = 0.0  # how long its batches may wait for others (its storage profile)
        #: What its backend keeps of it for its compaction, dropped when it
        #: closes (a reference, not a closure per ledger: four objects each
        #: for the collector at 10,000 written topics).
        self.kept: SectionKeeper | None = None
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
