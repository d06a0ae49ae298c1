"""What a managed ledger records of its ledgers, and the names it may take.

:class:`LedgerMeta` is one ledger's entry in the managed ledger's metadata
record (JSON in the metadata store); its ``state`` is one of the names
below. No I/O here.
"""
from __future__ import annotations

import asyncio
import logging
from urllib.parse import quote

from .backend import LedgerHandle

log = logging.getLogger(__name__)

ROOT = "/managed-ledgers"
LEDGER_ID_COUNTER = "/counters/ledger-id"

OPEN, CLOSING, CLOSED, FENCED, FAILED = "open", "closing", "closed", "fenced", "failed"


class LedgerMeta:
    """What the managed ledger knows of one of its ledgers.

    ``entries``/``size`` count confirmed (durable) entries only.
    """

    __slots__ = ("ledger_id", "entries", "size", "created", "closed", "state", "ledger", "opening")

    def __init__(self, ledger_id: int, entries: int = 0, size: int = 0, created: float = 0.0,
                 closed: float | None = None, state: str = "open") -> None:
        self.ledger_id = ledger_id
        self.entries = entries
        self.size = size
        self.created = created
        self.closed = closed
        self.state = state
        self.ledger: LedgerHandle | None = None
        self.opening: asyncio.Future | None = None

    def doc(self) -> dict:
        return {"id": self.ledger_id, "entries": self.entries, "size": self.size,
                "created": self.created, "closed": self.closed, "state": self.state}

    @classmethod
    def from_doc(cls, doc: dict) -> "LedgerMeta":
        return cls(int(doc["id"]), int(doc.get("entries", 0)), int(doc.get("size", 0)),
                   float(doc.get("created", 0.0)), doc.get("closed"), doc.get("state", "open"))


def check_name(name: str) -> None:
    """Managed ledger names are ``/``-separated paths without empty segments.

    A second-to-last segment ``cursors`` is refused: ``a/cursors/b`` would
    share its key with cursor ``b`` of managed ledger ``a``.
    """
    if not isinstance(name, str) or not name or name.startswith("/") or name.endswith("/") or "//" in name:
        raise ValueError(f"invalid managed ledger name {name!r}: use 'a/b/c' with non-empty segments")
    parts = name.split("/")
    if len(parts) >= 3 and parts[-2] == "cursors":
        raise ValueError(f"invalid managed ledger name {name!r}: 'cursors' cannot be the second-to-last segment")


def cursor_key(ml_key: str, cursor_name: str) -> str:
    if not cursor_name:
        raise ValueError("cursor names must not be empty")
    segment = quote(cursor_name, safe="")
    if segment in (".", ".."):
        segment = segment.replace(".", "%2E")
    return f"{ml_key}/cursors/{segment}"
