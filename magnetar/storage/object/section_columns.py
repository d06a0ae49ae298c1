"""An object ledger's index as columns: no object per committed section.

A ledger written on object storage gains one section per commit it is part
of, kept until the ledger rolls over (``MAX_SECTIONS_PER_LEDGER``); at
10,000 written topics that is one per entry, 20,000 a second. Kept as
:class:`~.index.Section` tuples (untracked: never walked), each one still
counted toward the young generation's threshold, because the collector
counts the objects of its container types allocated less those freed,
tracked or not: the open ledgers' growing indexes alone started a young
collection every 20,000 entries (about one a second), each walking the
entries in flight then, and every 20th of those a middle collection
walking all that had survived since the last one (docs/object-storage.md).

Here the ints are in arrays (``array.array`` is not one of the
collector's types) and the commit objects' keys (strs, shared by every
ledger of a commit) in one list: appending a section allocates nothing
the collector counts. A :class:`~.index.Section` is made, untracked,
only when one is read (a cold read, a compaction, a comparison).

Contract: a sequence of the ledger's sections in entry order, as a
``list[Section]`` reads (``len``, index, slice to a list, iteration,
``==`` with any sequence of sections); ``firsts`` is the column of first
entry ids, for ``bisect``. No I/O.
"""
from __future__ import annotations

from array import array
from typing import Iterable, Iterator, Sequence, overload

from .index import Section, new_section


class SectionColumns:
    __slots__ = ("firsts", "counts", "keys", "offsets", "lengths")

    def __init__(self, sections: Iterable[Section] = ()) -> None:
        self.firsts = array("q")
        self.counts = array("q")
        self.offsets = array("q")
        self.lengths = array("q")
        self.keys: list[str] = []
        for s in sections:
            self.append(s)

    def append(self, section: Section) -> None:
        """``section`` follows the last one (the caller keeps them contiguous)."""
        first, count, key, offset, length = section
        self.firsts.append(first)
        self.counts.append(count)
        self.keys.append(key)
        self.offsets.append(offset)
        self.lengths.append(length)

    def add(self, first: int, count: int, key: str, offset: int, length: int) -> None:
        """:meth:`append` of the section with these fields, without making it
        (the committer adds one to every ledger of every commit)."""
        self.firsts.append(first)
        self.counts.append(count)
        self.keys.append(key)
        self.offsets.append(offset)
        self.lengths.append(length)

    def __len__(self) -> int:
        return len(self.keys)

    def _at(self, i: int) -> Section:
        return new_section(self.firsts[i], self.counts[i], self.keys[i], self.offsets[i], self.lengths[i])

    @overload
    def __getitem__(self, i: int) -> Section: ...

    @overload
    def __getitem__(self, i: slice) -> list[Section]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self.keys)))]
        if i < 0:
            i += len(self.keys)
        if not 0 <= i < len(self.keys):
            raise IndexError("section index out of range")
        return self._at(i)

    def __iter__(self) -> Iterator[Section]:
        # Column by column, not index by index: a compaction lists a rolled-over
        # ledger's 1,000 sections, ~40 a second at 10,000 topics.
        return map(new_section, self.firsts, self.counts, self.keys, self.offsets, self.lengths)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SectionColumns):
            return (self.firsts == other.firsts and self.counts == other.counts and self.keys == other.keys
                    and self.offsets == other.offsets and self.lengths == other.lengths)
        if isinstance(other, Sequence):
            return len(other) == len(self.keys) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"SectionColumns({list(self)!r})"

    def end(self) -> int:
        """Entry id just past the last section (0 if none)."""
        return self.firsts[-1] + self.counts[-1] if self.keys else 0

    def total_length(self) -> int:
        """Bytes of all the sections."""
        return sum(self.lengths)
