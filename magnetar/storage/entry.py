"""What a managed ledger hands out: entries and ledger stats.

Plain records shared by the managed ledger, its cursors and every reader
above storage; this module imports nothing of the package.
"""
from __future__ import annotations

from dataclasses import dataclass

from .position import Position


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    data: bytes


@dataclass(frozen=True)
class LedgerInfo:
    """Stats of one ledger. ``size`` counts bytes on disk (8-byte frame
    headers included); times are Unix seconds; ``closed`` is None while open."""

    ledger_id: int
    entries: int
    size: int
    created: float
    state: str
    closed: float | None = None
