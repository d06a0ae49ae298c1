"""How many of a run's entries a byte-bounded read keeps.

A bulk read (``EntryReader.read_runs`` with ``max_bytes``) stops after the
entry that reaches its budget. :func:`bytes_within` says where, in one
compiled call when built (``magnetar/protocol/_hot_fetch.c``: a run of one
message per entry holds ~25,000 entries); :func:`bytes_within_python` is
its twin.
"""
from __future__ import annotations

from magnetar.protocol.compiled import hot as _hot


def bytes_within(datas: list[bytes], start: int, limit: int) -> tuple[int, int]:
    """``(keep, total)``: the fewest of ``datas`` (at least 1) whose sizes,
    added to ``start``, reach ``limit``, and that sum; ``(len(datas) + 1,
    start + all their sizes)`` when they never do."""
    if _hot is not None:
        return _hot.bytes_within(datas, start, limit)
    return bytes_within_python(datas, start, limit)


def bytes_within_python(datas: list[bytes], start: int, limit: int) -> tuple[int, int]:
    """The pure-Python twin of the compiled ``bytes_within``."""
    total = start
    for keep, data in enumerate(datas, 1):
        total += len(data)
        if total >= limit:
            return keep, total
    return len(datas) + 1, total
