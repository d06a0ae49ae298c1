"""The body of a FETCH_ENTRIES_RESPONSE: ``[u32 count][u32 size]...`` then
the stored entries back to back (big-endian), as the Spark connector's
reader parses it (``pyspark_magnetar/fetch_columns.py``).

:func:`fetch_payload` builds it from the runs ``ManagedLedger.read_runs``
gives, in one compiled call when built (``_hot_fetch.c``: no Python step
per entry; a response of one message per entry holds ~25,000);
:func:`fetch_payload_python` is its twin. TypeError for an entry that is
not bytes-like.
"""
from __future__ import annotations

import struct
from typing import Sequence

from .compiled import hot as _hot

Runs = Sequence[tuple[int, int, list[bytes]]]


def fetch_payload(runs: list[tuple[int, int, list[bytes]]]) -> bytes:
    """``[u32 count][u32 size]...`` and the entries of ``runs``, in order."""
    if _hot is not None:
        return _hot.fetch_payload(runs)
    return fetch_payload_python(runs)


def fetch_payload_python(runs: Runs) -> bytes:
    """The pure-Python twin of the compiled ``fetch_payload``."""
    datas = [data for _, _, run in runs for data in run]
    return b"".join([struct.pack(f">I{len(datas)}I", len(datas), *map(len, datas)), *datas])
