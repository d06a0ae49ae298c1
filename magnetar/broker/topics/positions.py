"""Where things are in a topic's managed ledger: start and end positions,
where a reader or a seek starts, which entry holds an offset or a time, and
the last message id a client is told.

Plain functions of the ledger (and, for offsets, the topic's next offset):
``Topic`` exposes them as methods for its callers.
"""
from __future__ import annotations

from magnetar.protocol import pb
from magnetar.storage import Entry, ManagedLedger, Position

from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.entries.markers import is_marker
from magnetar.broker.entries.message_peek import producer_metadata

UINT64_MAX = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1


def before(pos: Position) -> Position:
    return Position(pos.ledger_id, pos.entry_id - 1)


def end_position(ledger: ManagedLedger) -> Position:
    """A mark-delete position that has every stored entry behind it."""
    last = ledger.last_confirmed
    if last is not None:
        return last
    return before(ledger.next_position(Position(0, -1)))


def start_position(ledger: ManagedLedger) -> Position:
    """A mark-delete position that has every stored entry ahead of it."""
    first = ledger.first_position()
    return before(first) if first is not None else end_position(ledger)


def next_write_position(ledger: ManagedLedger) -> Position:
    """The position the next appended entry will get."""
    return ledger.next_position(end_position(ledger))


def mark_delete_for_start(ledger: ManagedLedger, mid: pb.MessageIdData) -> Position:
    """Where a reader's cursor starts for a start message id.

    The entry holding the start message is delivered again: the client
    filters what precedes it (batch indexes, exclusive starts).
    """
    ledger_id, entry_id = mid.ledgerId, mid.entryId
    if ledger_id == UINT64_MAX or entry_id == UINT64_MAX:
        return start_position(ledger)
    if ledger_id >= INT64_MAX or entry_id >= INT64_MAX:
        return end_position(ledger)
    return Position(ledger_id, entry_id - 1)


def read_position_for(ledger: ManagedLedger, mid: pb.MessageIdData) -> Position:
    """The first entry to read when seeking to ``mid``."""
    if mid.ledgerId == UINT64_MAX or mid.entryId == UINT64_MAX:
        first = ledger.first_position()
        return first if first is not None else next_write_position(ledger)
    if mid.ledgerId >= INT64_MAX or mid.entryId >= INT64_MAX:
        return next_write_position(ledger)
    return Position(mid.ledgerId, mid.entryId)


async def find_position_by_time(ledger: ManagedLedger, publish_time_ms: int) -> Position:
    """The first entry published at or after the time (or the next write position)."""
    pos = await ledger.find_first(lambda e: entry_info(e.data).publish_time >= publish_time_ms)
    return pos if pos is not None else next_write_position(ledger)


async def position_of_offset(ledger: ManagedLedger, next_offset: int, offset: int) -> Position:
    """The entry to read first for the message at topic offset ``offset``.

    That is the entry holding it (the first whose last offset is at or
    after ``offset``), so messages of the same batch with lower offsets
    are read too: the client skips them. An offset older than the first
    retained entry gives that entry (the reader sees the gap); one not
    yet written (at or past ``next_offset``, any size) gives the next
    write position, so the reader waits for it. An offset whose entry is
    still on its way to disk gives the first unconfirmed entry, which is
    at or before it. Costs about log2(stored entries) entry reads.

    Raises what the storage raises for a failed read.
    """
    if offset >= next_offset:
        return next_write_position(ledger)
    pos = await ledger.find_first(lambda e: entry_info(e.data).last_offset >= offset)
    return pos if pos is not None else next_write_position(ledger)


def _is_marker_entry(entry: Entry) -> bool:
    metadata = producer_metadata(entry.data)
    return metadata is not None and is_marker(metadata)


def _entry_before(ledger: ManagedLedger, pos: Position) -> Position | None:
    """The stored entry just before ``pos``, in its ledger or the last entry
    of the ledger before it; None before the first stored entry."""
    if pos.entry_id > 0:
        return before(pos)
    earlier = [info for info in ledger.ledgers if info.ledger_id < pos.ledger_id and info.entries > 0]
    if not earlier:
        return None
    last = max(earlier, key=lambda info: info.ledger_id)
    return Position(last.ledger_id, last.entries - 1)


async def last_message_id(ledger: ManagedLedger, skip_markers: bool) -> pb.MessageIdData:
    """The id of the last message stored, as GET_LAST_MESSAGE_ID answers it.

    With ``skip_markers`` (a topic that may hold markers) trailing markers
    are passed over: they are never delivered, and a reader told that one
    is the last message would wait for it forever (Pulsar #22571).
    """
    last = ledger.last_confirmed
    if last is None:
        end = end_position(ledger)
        return pb.MessageIdData(ledgerId=end.ledger_id, entryId=end.entry_id & UINT64_MAX)
    entries: list[Entry] = await ledger.read_entries(last, 1)
    if skip_markers:
        # Back across ledgers: after a restart or a rollover the newest
        # ledger may hold markers only (snapshots written after the last
        # message), and its ``L:-1`` reads as an empty topic to clients
        # (found by the chaos harness's regions topology: a reader from the
        # earliest message of a topic with 18,226 messages read none).
        while entries and _is_marker_entry(entries[0]):
            earlier = _entry_before(ledger, last)
            if earlier is None:  # markers only: the topic has no message
                last, entries = before(last), []
                break
            last = earlier
            entries = await ledger.read_entries(last, 1)
    mid = pb.MessageIdData(ledgerId=last.ledger_id, entryId=last.entry_id & UINT64_MAX)
    if entries:
        n = entry_info(entries[0].data).num_messages
        if n > 1:
            mid.batch_index = n - 1
    return mid
