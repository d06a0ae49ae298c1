"""The disk keeper (storage/object/spilled_sections.py): a sealed ledger's
sections read back from the commit objects spilled, each entry's CRC
checked; a ledger not started here or too large is not taken (None), one
partly past the byte bound or damaged reads as None, and nothing raises."""
from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _gathered(segments: list[bytes], sections: list[tuple[int, int, int, int]]):
    """The gather's arguments for ``sections`` as (segment, position, length, count) in ``segments``."""
    from array import array

    from magnetar.storage.object.spilled_sections import OFFSET_BITS
    maps = dict(enumerate(segments))
    places = array("q", [(seg << OFFSET_BITS) | (pos // 2) for seg, pos, _, _ in sections])
    offsets = array("q", [pos - pos // 2 for _, pos, _, _ in sections])  # the place and the offset add up
    return maps, places, offsets, array("q", [n for *_, n, _ in sections]), array("q", [c for *_, c in sections])


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_compiled_gather_and_its_twin_agree_whole_or_damaged(data):
    """Sections of random entries laid in two segments, then maybe damaged
    (a flipped byte, a length one short or one long, a count one off, a
    segment not mapped): both give the sections back to back, or None."""
    from magnetar.protocol.compiled import hot
    from magnetar.storage.object.spilled_sections import gather_sections_python

    segments, sections, expected = [bytearray(b"pad"), bytearray()], [], []
    for entries in data.draw(st.lists(st.lists(st.binary(max_size=30), min_size=1, max_size=4), max_size=8)):
        seg = data.draw(st.integers(0, 1))
        framed = frames(entries)
        sections.append((seg, len(segments[seg]), len(framed), len(entries)))
        segments[seg] += framed
        expected.append(framed)
    damage = data.draw(st.sampled_from(["none", "flip", "short", "long", "count", "unmapped"]))
    if sections and damage != "none":
        k = data.draw(st.integers(0, len(sections) - 1))
        seg, pos, n, c = sections[k]
        if damage == "flip":
            segments[seg][pos + data.draw(st.integers(0, n - 1))] ^= 0x20
        elif damage == "short":
            sections[k] = (seg, pos, n - 1, c)
        elif damage == "long":
            segments[seg] += b"\0"
            sections[k] = (seg, pos, n + 1, c)
        elif damage == "count":
            sections[k] = (seg, pos, n, c + data.draw(st.sampled_from([-1, 1])))
        else:
            sections[k] = (7, pos, n, c)
        want = None
    else:
        want = b"".join(expected)
    args = _gathered([bytes(s) for s in segments], sections)
    assert gather_sections_python(*args) == want
    if hot is not None:
        assert hot.gather_sections(*args) == want


def test_the_compiled_gather_refuses_what_is_not_its_columns():
    from array import array

    from magnetar.protocol.compiled import hot
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    one = array("q", [0])
    with pytest.raises(TypeError):
        hot.gather_sections({0: b""}, [0], one, one, one)  # a list, not array('q')
    with pytest.raises(TypeError):
        hot.gather_sections({0: b""}, array("i", [0]), one, one, one)
    with pytest.raises(ValueError):
        hot.gather_sections({0: b""}, array("q", [0, 0]), one, one, one)
    with pytest.raises(TypeError):
        hot.gather_sections([b""], one, one, one, one)
    assert hot.gather_sections({}, array("q"), array("q"), array("q"), array("q")) == b""


def test_a_read_finds_the_places_with_no_python_step_per_section(tmp_path):
    """The places of a sealed ledger's sections are found on the event loop
    (the writes move them): a loop step per section was ~1.5 ms of it per
    compaction at 10,000 written topics. Counted in Python line events, a
    ledger of 1,000 sections costs what one of 10 does (compiled; the twin
    steps per section)."""
    from magnetar.protocol.compiled import hot
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    keeper = SpilledSections(tmp_path / "s", 1 << 24)
    steps = []
    for lid, commits in ((1, 10), (2, 1000)):
        spilled, _ = spill_ledger(keeper, lid, commits)
        columns = ledger(lid, spilled).sections
        lines = 0

        def trace(frame, event, arg):
            nonlocal lines
            if event == "line":
                lines += 1
            return trace

        sys.settrace(trace)
        try:
            places = keeper._places(columns)
        finally:
            sys.settrace(None)
        assert places is not None and len(places) == commits
        steps.append(lines)
    assert steps[0] == steps[1], steps


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_compiled_places_and_their_twin_agree(data):
    """Keys of the spill's form, some not (another prefix, no seq, a seq
    outside the positions, a place not spilled, a '/' in the name, not
    ASCII): both give every section's place, or None."""
    from array import array

    from magnetar.protocol.compiled import hot
    from magnetar.storage.object.spilled_sections import spill_places_python

    base = data.draw(st.integers(0, 5))
    pos = array("q", data.draw(st.lists(st.sampled_from([-1, 0, 7, 1 << 41, 12345]), min_size=1, max_size=8)))
    good = st.integers(base, base + len(pos) - 1).map(lambda seq: f"data/s1/1700000000000-{seq:08d}")
    odd = st.sampled_from(["data/s2/1-00000001", "data/s1/1700000000000", "data/s1/x-1a", "data/s1/a/b-1",
                           "data/s1/é-1", f"data/s1/1-{base + 99}", f"data/s1/1-{max(0, base - 1)}", "data/s1",
                           "data/s1/-", "data/s1/1-" + "9" * 19])
    keys = data.draw(st.lists(st.one_of(good, good, good, odd), max_size=10))
    keys = [sys.intern(k) for k in keys]  # shared objects, as a commit's key is between its ledgers
    want = spill_places_python(keys, "data/s1", pos, base)
    if hot is not None:
        got = hot.spill_places(keys, "data/s1", pos, base)
        assert (None if got is None else array("q", got)) == want, (keys, list(pos), base)
    for k, key in zip(range(len(keys)), keys):  # what the twin says, said by hand
        if want is not None:
            assert want[k] == pos[int(key.rsplit("-", 1)[1]) - base]


def test_the_compiled_places_refuse_what_is_not_their_arguments():
    from array import array

    from magnetar.protocol.compiled import hot
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    with pytest.raises(TypeError):
        hot.spill_places(("data/s/1-1",), "data/s", array("q", [0]), 0)  # a tuple, not a list
    with pytest.raises(TypeError):
        hot.spill_places(["data/s/1-1"], "data/s", [0], 0)
    assert hot.spill_places([b"data/s/1-1"], "data/s", array("q", [0]), 0) is None  # bytes: not a key
    assert hot.spill_places([], "data/s", array("q"), 0) == b""
