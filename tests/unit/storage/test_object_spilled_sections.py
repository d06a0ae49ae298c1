"""The disk keeper (storage/object/spilled_sections.py): a sealed ledger's
sections read back from the commit objects spilled, each entry's CRC
checked; a ledger not started here or too large is not taken (None), one
partly past the byte bound or damaged reads as None, and nothing raises."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from magnetar.storage.framing import frames
from magnetar.storage.object.index import commit_object, new_section
from magnetar.storage.object.section_columns import SectionColumns
from magnetar.storage.object.spilled_sections import SpilledSections


_seqs = iter(range(1, 1 << 30))


def commit(keeper: SpilledSections, parts: dict) -> tuple[str, dict]:
    """Spill the next commit object, of ``parts`` (ledger -> framed section): its key, its sections by ledger."""
    key = commit_object("session", 1_700_000_000_000, next(_seqs))
    blob, placed, offset = b"", {}, 0
    for lid, framed in parts.items():
        placed[lid] = (offset, len(framed))
        blob += framed
        offset += len(framed)
    keeper.wrote(key, blob)
    return key, placed


def ledger(lid: int, spilled: list[tuple[str, dict, int]]) -> SimpleNamespace:
    columns, first = SectionColumns(), 0
    for key, placed, count in spilled:
        offset, length = placed[lid]
        columns.append(new_section(first, count, key, offset, length))
        first += count
    return SimpleNamespace(ledger_id=lid, sections=columns, size=columns.total_length())


def spill_ledger(keeper: SpilledSections, lid: int, commits: int, beside: dict | None = None) -> tuple[list, list]:
    """Start ledger ``lid`` and spill ``commits`` commit objects holding a
    one-entry section of it each (and ``beside``'s sections): (what
    :func:`ledger` takes, the sections' framed bytes)."""
    keeper.start(lid)
    spilled, sections = [], []
    for k in range(commits):
        one = frames([b"entry%d" % k])
        sections.append(one)
        spilled.append((*commit(keeper, {lid: one, **(beside or {})}), 1))
    return spilled, sections


def test_a_sealed_ledger_reads_back_from_the_spill_and_only_once(tmp_path):
    keeper = SpilledSections(tmp_path / "s", 1 << 20)
    keeper.start(1)
    keeper.start(2)
    spilled, sections = [], []
    for k in range(5):
        one, two = frames([b"a%d" % k, b"bb%d" % k]), frames([b"other%d" % k])
        sections.append(one)
        spilled.append((*commit(keeper, {2: two, 1: one}), 2))
    reader = keeper.take(ledger(1, spilled))
    assert asyncio.run(reader.parts()) == sections and keeper.taken == 1
    assert keeper.take(ledger(1, spilled)) is None  # once
    other = ledger(2, spilled)
    other.ledger_id = 3
    assert keeper.take(other) is None  # never started here


def test_damage_a_bound_or_a_deleted_segment_means_not_kept(tmp_path):
    keeper = SpilledSections(tmp_path / "s", 4000, segment_bytes=1000)  # four segments of 1,000 bytes
    for lid in (1, 2, 3):
        keeper.start(lid)
    spilled = [(*commit(keeper, {1: frames([b"x" * 100])}), 1) for k in range(3)]
    path = next((tmp_path / "s").iterdir())
    data = bytearray(path.read_bytes())
    data[50] ^= 1  # inside the first commit's entry
    path.write_bytes(bytes(data))
    assert asyncio.run(keeper.take(ledger(1, spilled)).parts()) is None and keeper.missed == 1
    keeper.ledger_max_bytes = 100
    big = [(*commit(keeper, {2: frames([b"y" * 100])}), 1) for k in range(2)]
    assert keeper.take(ledger(2, big)) is None and keeper.missed == 2  # larger than a ledger may be
    keeper.ledger_max_bytes = 1 << 20
    early = [(*commit(keeper, {3: frames([b"z" * 300])}), 1) for k in range(2)]
    later = [(*commit(keeper, {3: frames([b"w" * 300])}), 1) for k in range(20)]  # 6 KB more: the first segments go
    assert keeper.bytes <= 4000 and keeper._base > 1  # the dead commits' slots trimmed
    keeper.start(4)
    assert asyncio.run(keeper.take(SimpleNamespace(ledger_id=4, sections=ledger(3, later[-3:]).sections,
                                                   size=900)).parts()) == [frames([b"w" * 300])] * 3
    assert asyncio.run(keeper.take(ledger(3, early)).parts()) is None and keeper.missed == 3


def where(keeper: SpilledSections, seq: int) -> int:
    i = seq - keeper._base
    return keeper._pos[i] if 0 <= i < len(keeper._pos) else -1


def test_a_write_that_fails_keeps_less_and_raises_nothing(tmp_path):
    keeper = SpilledSections(tmp_path / "s", 1 << 20)
    keeper.start(1)
    keeper.wrote(commit_object("s", 1, 1), frames([b"a"]))
    keeper._close_fd()
    keeper._fd = 10_000  # not an open file: the next write fails
    keeper.wrote(commit_object("s", 1, 2), frames([b"b"]))
    assert where(keeper, 2) == -1 and keeper._fd is None
    keeper.wrote(commit_object("s", 1, 4), frames([b"c"]))  # a new segment (3: a PUT retried, skipped)
    assert where(keeper, 4) == 1 << 40 and where(keeper, 3) == -1
    keeper.clear()
    assert list((tmp_path / "s").iterdir()) == [] and keeper.bytes == 0


def test_commits_spilled_out_of_order_are_each_found(tmp_path):
    """Pipelined PUTs end out of order: a commit spilled after a later one is found at its own place."""
    keeper = SpilledSections(tmp_path / "s", 1 << 20)
    keeper.start(1)
    second, first = frames([b"second"]), frames([b"first"])
    keeper.wrote(commit_object("s", 1, 2), second)
    keeper.wrote(commit_object("s", 1, 1), first)
    sections = SectionColumns([new_section(0, 1, commit_object("s", 1, 1), 0, len(first)),
                               new_section(1, 1, commit_object("s", 1, 2), 0, len(second))])
    reader = keeper.take(SimpleNamespace(ledger_id=1, sections=sections, size=len(first) + len(second)))
    assert asyncio.run(reader.parts()) == [first, second]


def test_a_ledger_s_sections_are_read_without_a_syscall_each(tmp_path, monkeypatch):
    """A ``pread`` per section gave up the GIL and waited for the busy event
    loop to hand it back, up to the 5 ms switch interval each: a ledger of
    1,000 sections took seconds. The sections are sliced from mapped segments."""
    import os

    keeper = SpilledSections(tmp_path / "s", 1 << 20)
    spilled, sections = spill_ledger(keeper, 1, 50, beside={2: frames([b"x"])})
    reads = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda *a: reads.append(a) or real(*a))
    assert asyncio.run(keeper.take(ledger(1, spilled)).parts()) == sections
    assert reads == []


def test_a_take_holds_nothing_per_section_until_its_read(tmp_path):
    """A broker closing after 10,000 written topics seals every ledger at
    once, and each seal takes its ledger's reader; most of those compactions
    are then cancelled. A plan made at the take (a tuple per section) held a
    GB of heap while the broker stopped: the places are found at the read."""
    import tracemalloc

    keeper = SpilledSections(tmp_path / "s", 1 << 24)
    spilled, sections = spill_ledger(keeper, 1, 1000)
    sealed = ledger(1, spilled)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        reader = keeper.take(sealed)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2_000, f"{held} bytes held by a take of 1,000 sections"
    assert asyncio.run(reader.parts()) == sections and keeper.taken == 1
