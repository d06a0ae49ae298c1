"""Versions of the formats Magnetar keeps data in, and the check every reader makes.

Each kind of stored data says which format it is in (docs/operations.md,
"Data formats"); a record written before it carried one is format 1. A
reader that meets a format newer than it knows raises
:class:`NewerFormatError` before it writes anything, and a broker that gets
it while starting stops with its message as one line: a newer Magnetar wrote
that data, and only it (or a later one) may touch it.
"""
from __future__ import annotations


class NewerFormatError(Exception):
    """Data in a format newer than this code knows; the message is one line."""


def check_format(what: str, where: str, found: object, known: int) -> int:
    """``found`` (the format a record says it is in) if this code reads it;
    NewerFormatError if it is newer than ``known`` or not a format number."""
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise NewerFormatError(f"{what} at {where} says format {found!r}, which this Magnetar does not know "
                               f"(it reads formats 1 to {known}): nothing was changed")
    if found > known:
        raise NewerFormatError(f"{what} at {where} is in format {found}, newer than this Magnetar reads "
                               f"(up to {known}): a newer Magnetar wrote it; upgrade this broker. "
                               f"Nothing was changed")
    return found
