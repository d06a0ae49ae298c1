"""An object-storage ledger's sections are out of the cyclic collector's sight.

An open ledger keeps a ``Section`` per commit until it rolls over; at 10,000
written topics that is 20,000 new ones a second, and while they were tracked
every middle-generation collection walked them (114-177 ms pauses, the
10,000-topic p99). ``new_section`` untracks them in the compiled hot path; a
tuple that could hold a cycle is never untracked."""
from __future__ import annotations

import gc

from magnetar.protocol.compiled import hot
from magnetar.storage.object.commit_records import decode_record, encode_record
from magnetar.storage.object.index import Section, new_section, untrack_atoms_python


def test_the_install_under_test_has_the_compiled_twin():
    # The suite runs on a built install (make install); without it the
    # collector would walk every section and nothing below would be checked.
    assert hot is not None


def test_a_new_section_is_untracked_where_cpython_keeps_a_named_tuple_tracked():
    plain = Section(0, 10, "data/w/0000000000001-00000001", 0, 1234)
    gc.collect()
    assert gc.is_tracked(plain)  # CPython untracks exact tuples only
    section = new_section(0, 10, "data/w/0000000000001-00000001", 0, 1234)
    assert not gc.is_tracked(section)
    assert section == plain and type(section) is Section and section.end() == 10


def test_sections_read_back_from_records_are_untracked_too():
    section = new_section(5, 3, "data/w/0000000000002-00000001", 64, 99)
    key, decoded = decode_record(encode_record(section.key, [(7, section)]))
    assert decoded == [(7, section)]
    assert not gc.is_tracked(decoded[0][1])
    assert not gc.is_tracked(Section.decode(5, section.encode()))


def test_a_tuple_that_could_hold_a_cycle_stays_tracked():
    class WithDict(tuple):
        pass

    holds_a_list = Section(0, 1, [], 0, 1)  # type: ignore[arg-type]
    assert hot.untrack_atoms(holds_a_list) is holds_a_list and gc.is_tracked(holds_a_list)
    with_dict = WithDict((1, "a"))
    assert hot.untrack_atoms(with_dict) is with_dict and gc.is_tracked(with_dict)
    assert hot.untrack_atoms([1, 2]) == [1, 2]


def test_the_python_twin_returns_the_section_itself():
    section = Section(0, 1, "k", 0, 1)
    assert untrack_atoms_python(section) is section
