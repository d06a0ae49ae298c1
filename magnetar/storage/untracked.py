"""Tuples of plain values out of the cyclic collector's sight.

An object the collector tracks is walked by every collection of the
generation it sits in. At 10,000 written topics the objects alive across a
young collection (each ledger's in-flight batch, each open ledger's index)
were most of what a middle-generation collection walked: pauses of 100-200
ms, the p99 of a publish (docs/object-storage.md). A tuple of ints, floats,
strs, bytes or None can never be part of a cycle, so taking it out of the
collector's lists changes nothing but that walk; reference counting still
frees it. CPython does the same for exact tuples by itself, but only when a
young collection first meets them (it walks them once) and never for a
named tuple.
"""
from __future__ import annotations

from typing import TypeVar

from ..protocol.compiled import hot

T = TypeVar("T")


def untrack_atoms_python(t: T) -> T:
    """The pure-Python twin of ``_hot.untrack_atoms``: Python cannot take an
    object out of the collector's lists, so ``t`` stays tracked (the young
    collection untracks an exact tuple of atoms when it first meets it)."""
    return t


#: ``t`` itself, untracked if it is a tuple (or a tuple subclass without a
#: ``__dict__``) of atoms only (compiled twin); anything else untouched.
untrack_atoms = hot.untrack_atoms if hot is not None else untrack_atoms_python
