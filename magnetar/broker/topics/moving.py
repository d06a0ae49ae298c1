"""A topic in a moving bundle, as the source names it to the destination.

The source releasing a bundle (PIP-307) lists the topics it had loaded in
the Assigning record (``cluster.channel.BundleState.topics``), so the
destination can load them before it takes the bundle. With each name goes,
when the source knows it, the topic's tail: the position of its last stored
entry and the offset that follows it. The destination uses the offset only
if its own recovery finds that same entry last (an entry at a position
never changes), and otherwise reads the entry as any load does: a stale or
wrong hint costs a read, never a wrong offset.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MovingTopic:
    name: str
    #: (ledger id, entry id) of the last entry stored, None: unknown.
    last: tuple[int, int] | None = None
    #: The offset the topic gives its next message (after ``last``'s).
    next_offset: int | None = None

    def doc(self) -> dict:
        doc: dict = {"name": self.name}
        if self.last is not None and self.next_offset is not None:
            doc["last"] = list(self.last)
            doc["next_offset"] = self.next_offset
        return doc

    @classmethod
    def parse(cls, doc: object) -> "MovingTopic | None":
        """From a record's item; None for one this version cannot read."""
        if isinstance(doc, str):
            return cls(doc)
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            return None
        last, offset = doc.get("last"), doc.get("next_offset")
        if (isinstance(last, list) and len(last) == 2 and all(type(x) is int for x in last)
                and type(offset) is int):
            return cls(doc["name"], (last[0], last[1]), offset)
        return cls(doc["name"])
