"""Positions: where an entry lives, totally ordered in append order.

Ledger ids grow over the life of a managed ledger, so ``(ledger_id, entry_id)``
compares in append order, even across ledgers that no longer exist. Entry ids
start at 0 in every ledger; ``Position(ledger_id, -1)`` means "just before the
first entry of that ledger" (used for mark-delete positions).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True, slots=True)
class Position:
    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"

    @classmethod
    def parse(cls, text: str) -> "Position":
        """Inverse of ``str()``: ``"12:3"`` -> ``Position(12, 3)``."""
        ledger, sep, entry = text.partition(":")
        if not sep:
            raise ValueError(f"invalid position {text!r}: expected 'ledger:entry'")
        return cls(int(ledger), int(entry))
