"""The bytes a writer keeps of its ledgers' committed sections, for their
compaction (storage/object/kept_sections.py): bounded per ledger and in
all, handed over once and only when complete."""
from __future__ import annotations

from magnetar.storage.object.kept_sections import KeptSections


def test_a_started_ledger_hands_over_its_sections_once_in_order():
    kept = KeptSections()
    kept.start(1)
    for part in (b"a", b"bb", b"ccc"):
        kept.add(1, part)
    assert kept.bytes == 6
    assert kept.take_parts(1, 3) == [b"a", b"bb", b"ccc"]
    assert kept.take_parts(1, 3) is None and kept.bytes == 0


def test_only_ledgers_started_here_are_kept_and_only_when_complete():
    kept = KeptSections()
    kept.add(2, b"x")  # a recovered ledger: never started here
    assert kept.take_parts(2, 1) is None
    kept.start(3)
    kept.add(3, b"x")
    assert kept.take_parts(3, 2) is None and kept.bytes == 0  # a section is missing: the store is read instead


def test_a_ledger_past_its_bound_or_the_total_gives_its_bytes_up():
    kept = KeptSections(max_bytes=10, ledger_max_bytes=4)
    kept.start(1)
    kept.add(1, b"abc")
    kept.add(1, b"de")  # 5 > 4: dropped
    assert kept.take_parts(1, 2) is None and kept.bytes == 0
    kept.start(2)
    kept.start(3)
    kept.add(2, b"1234")
    kept.add(3, b"1234")
    kept.add(2, b"")
    kept.start(4)
    kept.add(4, b"xyz")  # 11 > 10 in all: dropped, the others kept
    assert kept.bytes == 8
    assert kept.take_parts(4, 1) is None
    assert kept.take_parts(2, 2) == [b"1234", b""] and kept.take_parts(3, 1) == [b"1234"]
    assert kept.bytes == 0
