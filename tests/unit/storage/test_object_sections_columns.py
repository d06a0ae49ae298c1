"""An object ledger's index is columns: a committed section leaves nothing
the collector counts.

The collector starts a young collection once the objects of its types
allocated less those freed pass the threshold (20,000 in a broker),
tracked or not. An open ledger kept a ``Section`` (untracked) per commit
until it rolled over: at 10,000 written topics, one per entry, so the
indexes alone started a young collection every 20,000 entries and a
middle one every 20 of those (docs/object-storage.md)."""
from __future__ import annotations

import asyncio
import gc
from bisect import bisect_right

import pytest

from magnetar.storage.object.object_ledger import ObjectLedger
from magnetar.storage.object.index import Section, new_section
from magnetar.storage.object.section_columns import SectionColumns

KEY = "data/w/0000000000001-00000001"


def _sections(n: int, first: int = 0) -> list[Section]:
    return [new_section(first + 2 * i, 2, f"{KEY}-{i % 3}", 100 * i, 90 + i) for i in range(n)]


def test_columns_read_as_the_list_of_sections_they_hold():
    made = _sections(7)
    cols = SectionColumns(made[:5])
    cols.append(made[5])
    cols.append(made[6])
    assert len(cols) == 7 and cols and not SectionColumns()
    assert cols == made and made == cols and cols == SectionColumns(made)  # a list on the left too (a reload's check)
    assert cols != made[:6] and cols != _sections(7, first=1)
    assert list(cols) == made and cols[0] == made[0] and cols[-1] == made[-1] and cols[2:4] == made[2:4]
    assert all(type(s) is Section and not gc.is_tracked(s) for s in cols)
    assert cols.end() == made[-1].end() == 14 and SectionColumns().end() == 0
    assert cols.total_length() == sum(s.length for s in made)
    assert bisect_right(cols.firsts, 5) - 1 == 2
    with pytest.raises(IndexError):
        cols[7]
    with pytest.raises(IndexError):
        cols[-8]


def test_a_ledger_s_committed_sections_are_counted_by_the_collector_only_while_the_commit_holds_them():
    ledger = ObjectLedger(1, 1)
    gc.collect()
    gc.disable()
    try:
        before = gc.get_count()[0]
        made = _sections(1000)  # a commit's, one per ledger: freed after its receipts
        for section in made:
            ledger._committed(section)
        del made, section
        grown = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert ledger.entry_count == 2000 and len(ledger.sections) == 1000
    assert grown < 10, f"{grown} objects the collector counts kept for 1,000 sections"


def test_a_sealed_ledger_s_chunks_replace_its_sections():
    ledger = ObjectLedger(1, 1, _sections(4))
    assert ledger.entry_count == 8 and ledger.size == sum(s.length for s in _sections(4))
    chunk = [new_section(0, 8, "ledgers/1/0", 0, 400)]
    ledger.use(chunk, compacted=True)
    assert ledger.sections == chunk and list(ledger.firsts) == [0] and ledger.compacted


def _reachable_sections(root: object, depth: int = 4) -> int:
    """Section objects reachable from ``root`` within ``depth`` references
    (untracked ones too: get_referents lists what a container holds)."""
    found, seen, layer = 0, {id(root)}, [root]
    for _ in range(depth):
        nxt = []
        for obj in layer:
            for ref in gc.get_referents(obj):
                if id(ref) not in seen:
                    seen.add(id(ref))
                    found += type(ref) is Section
                    nxt.append(ref)
        layer = nxt
    return found


@pytest.mark.parametrize("place", ["object"], indirect=True)
async def test_a_written_ledger_holds_no_section_object_and_reads_back(place):
    backend = await place.open()
    ledger = await backend.create(1)
    loop = asyncio.get_running_loop()
    for i in range(40):  # one commit each: 40 sections
        done = loop.create_future()
        backend.submit(ledger, [b"%d" % i], done.set_result, loop)
        assert await asyncio.wait_for(done, 10) is None
    assert len(ledger.sections) == 40 and ledger.entry_count == 40
    assert _reachable_sections(ledger) == 0  # the committer's own pass appended columns
    got: list[bytes] = []
    while len(got) < 40:
        got += await backend.read(ledger, len(got), 39, None)
    assert got == [b"%d" % i for i in range(40)]
