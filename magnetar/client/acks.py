"""Consumer-side acknowledgement bookkeeping. Pure data structures, no I/O.

The broker tracks acknowledgements per *entry*. A batch entry holds several
messages, so the client remembers which members were acked and acks the
entry once all of them are (:class:`BatchAckTracker`). Acks are grouped and
sent at most every ack-group interval (:class:`PendingAcks`), each with a
request id, and kept until the broker confirms them (:class:`UnconfirmedAcks`).
Negative acks and ack timeouts become redelivery requests when their
deadlines pass (:class:`Deadlines`).
"""
from __future__ import annotations

from typing import NamedTuple

from .message_id import MessageId


class BatchAckTracker:
    """Which members of partially acked batch entries were acknowledged.

    Also remembers the highest cumulative ack, so redelivered copies of
    messages the application already acked can be dropped (``is_acked``).
    """

    def __init__(self) -> None:
        self._acked: dict[tuple[int, int], int] = {}  # entry -> bitmask of acked members
        self._cumulative: MessageId | None = None

    def __len__(self) -> int:
        return len(self._acked)

    def ack(self, mid: MessageId) -> bool:
        """Record an individual ack. True when the whole entry is now acked
        (the entry ack is due); False while members remain."""
        if not mid.in_batch():
            self._acked.pop(mid.entry_key, None)
            return True
        key = mid.entry_key
        mask = self._acked.get(key, 0) | (1 << mid.batch_index())
        if mask == (1 << mid.batch_size()) - 1:
            self._acked.pop(key, None)
            return True
        self._acked[key] = mask
        return False

    def ack_cumulative(self, mid: MessageId) -> MessageId | None:
        """Record a cumulative ack up to and including ``mid``.

        Returns the whole-entry id to ack cumulatively on the wire, or None
        when nothing can be acked yet (``mid`` is the first entry's partial
        batch). A partial batch acks up to the entry before it; the entry
        itself follows once its remaining members are acked.
        """
        if self._cumulative is None or mid > self._cumulative:
            self._cumulative = mid
        key = mid.entry_key
        for other in [k for k in self._acked if k < key]:
            del self._acked[other]
        if not mid.in_batch() or mid.batch_index() == mid.batch_size() - 1:
            self._acked.pop(key, None)
            return mid.entry()
        mask = self._acked.get(key, 0) | ((1 << (mid.batch_index() + 1)) - 1)
        if mask == (1 << mid.batch_size()) - 1:
            self._acked.pop(key, None)
            return mid.entry()
        self._acked[key] = mask
        if mid.entry_id() > 0:
            return MessageId(mid.ledger_id(), mid.entry_id() - 1, -1, mid.partition())
        return None

    def is_acked(self, mid: MessageId) -> bool:
        """Whether the application already acknowledged ``mid``."""
        floor = self._cumulative
        if floor is not None:
            if mid.entry_key < floor.entry_key:
                return True
            if mid.entry_key == floor.entry_key and (floor.batch_index() < 0 or mid.batch_index() <= floor.batch_index()):
                return True
        mask = self._acked.get(mid.entry_key)
        return mask is not None and mid.batch_index() >= 0 and bool(mask >> mid.batch_index() & 1)

    def forget(self, mid: MessageId) -> None:
        self._acked.pop(mid.entry_key, None)

    def clear(self) -> None:
        """Forget everything (after a seek the old positions mean nothing)."""
        self._acked.clear()
        self._cumulative = None


class PendingAcks:
    """Acks waiting for the next group flush: whole-entry ids only."""

    def __init__(self) -> None:
        self._individual: dict[MessageId, None] = {}  # ordered set
        self.cumulative: MessageId | None = None

    def __len__(self) -> int:
        return len(self._individual) + (self.cumulative is not None)

    def add(self, entry: MessageId) -> None:
        self._individual[entry] = None

    def add_cumulative(self, entry: MessageId) -> None:
        if self.cumulative is None or entry > self.cumulative:
            self.cumulative = entry

    def take(self) -> tuple[list[MessageId], MessageId | None]:
        """The pending individual acks and cumulative ack; empties the group."""
        individual, cumulative = list(self._individual), self.cumulative
        self._individual.clear()
        self.cumulative = None
        return individual, cumulative

    def restore(self, group: "AckGroup") -> None:
        """Put back a group that was sent and not confirmed (sent again with
        the next flush; an ack the broker already applied is a no-op there)."""
        for entry in group.individual:
            self.add(entry)
        if group.cumulative is not None:
            self.add_cumulative(group.cumulative)


class AckGroup(NamedTuple):
    """What one ACK command acknowledged."""
    individual: list[MessageId]
    cumulative: MessageId | None


class UnconfirmedAcks:
    """Ack commands sent and not yet confirmed, by request id.

    An ack the broker has not confirmed may be lost: a topic handed over to
    another broker closes its cursors, and an ack that reaches the old owner
    after that is not applied (the new owner would deliver those messages
    again). So every ack is sent with a request id and kept here until its
    ACK_RESPONSE; when the link goes down, or the broker answers with an
    error, the sender (:mod:`.ack_sender`) puts the group back among the
    pending acks.
    """

    def __init__(self) -> None:
        self._sent: dict[int, AckGroup] = {}

    def __len__(self) -> int:
        return len(self._sent)

    def sent(self, request_id: int, group: AckGroup) -> None:
        self._sent[request_id] = group

    def answered(self, request_id: int) -> AckGroup | None:
        """The group of ``request_id``, no longer unconfirmed; None when it was
        already taken back (:meth:`take_all`)."""
        return self._sent.pop(request_id, None)

    def take_all(self) -> list[AckGroup]:
        """Every unconfirmed group; their answers, if any come, are ignored."""
        groups = list(self._sent.values())
        self._sent.clear()
        return groups


class Deadlines:
    """Whole-entry ids with a time each; ``pop_due`` takes the ones whose
    time has come. Used for negative acks (time = when to redeliver) and ack
    timeouts (time = when an unacked message counts as lost)."""

    def __init__(self) -> None:
        self._due: dict[MessageId, float] = {}

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, entry: MessageId) -> bool:
        return entry in self._due

    def add(self, entry: MessageId, when: float) -> None:
        self._due.setdefault(entry, when)

    def remove(self, entry: MessageId) -> None:
        self._due.pop(entry, None)

    def earliest(self) -> float | None:
        return min(self._due.values(), default=None)

    def pop_due(self, now: float) -> list[MessageId]:
        due = [e for e, when in self._due.items() if when <= now]
        for e in due:
            del self._due[e]
        return due

    def clear(self) -> None:
        self._due.clear()
