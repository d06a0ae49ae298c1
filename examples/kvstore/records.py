"""The shard log's record: one applied operation and the value it read.

Every write-ahead log entry is one JSON record
``{"request": id, "key": k, "old": value read, "new": value written}``.
Keeping ``old`` makes the log self-checking: replaying it, each record's
``old`` must equal the value the replay holds for its key at that point.
A record written from a stale view (two leaders interleaving their writes)
would break that, so :func:`apply` doubles as the invariant check.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


class StaleWrite(Exception):
    """A record's ``old`` differs from the replayed value: the log is not a
    valid series of operations."""


@dataclass(frozen=True, slots=True)
class Record:
    request: str
    key: str
    old: Any
    new: Any

    def encode(self) -> bytes:
        return json.dumps({"request": self.request, "key": self.key, "old": self.old, "new": self.new},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> "Record":
        """Raises ValueError for bytes that are not a record."""
        try:
            doc = json.loads(data)
            return cls(str(doc["request"]), str(doc["key"]), doc["old"], doc["new"])
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a kvstore record: {exc}") from None


def apply(values: dict[str, Any], record: Record) -> None:
    """Apply ``record`` to ``values``; raise StaleWrite if it read another value."""
    current = values.get(record.key)
    if current != record.old:
        raise StaleWrite(f"request {record.request} read {record.key}={record.old!r}, the log says {current!r}")
    values[record.key] = record.new


@dataclass(frozen=True, slots=True)
class Operation:
    """A client's write request: ``put`` a value or ``incr`` an integer."""

    request: str
    kind: str
    key: str
    value: Any = None

    def record(self, old: Any) -> Record:
        """The record this operation writes when it reads ``old``."""
        if self.kind == "put":
            return Record(self.request, self.key, old, self.value)
        if self.kind == "incr":
            return Record(self.request, self.key, old, (old or 0) + 1)
        raise ValueError(f"unknown operation {self.kind!r}")
