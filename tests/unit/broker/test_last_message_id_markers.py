"""GET_LAST_MESSAGE_ID passes over trailing markers across ledgers: after
a rollover or a restart the newest ledger may hold snapshot markers only,
and answering ``<that ledger>:-1`` made clients take the topic for empty
(found by ``magnetar-chaos run --topology regions``: the final read of a
topic with 18,226 messages, a replicated subscription on it and a restart
just before, read none).

Real storage: ledgers of two entries, so the markers start a new ledger."""
from __future__ import annotations

from magnetar.broker.entries.entry_format import build_entry_python
from magnetar.broker.entries.markers import marker_metadata
from magnetar.broker.topics.positions import last_message_id
from magnetar.metadata import MemoryMetadataStore
from magnetar.protocol import pb
from magnetar.protocol.frames import checksummed_block
from magnetar.storage import ManagedLedgerFactory, StorageConfig


def _message(offset: int) -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=offset, publish_time=1)
    return build_entry_python(checksummed_block(md.SerializeToString(), b"m"), 1, offset, 1)


def _marker(offset: int) -> bytes:
    md = marker_metadata(pb.REPLICATED_SUBSCRIPTION_SNAPSHOT)
    return build_entry_python(checksummed_block(md, b""), 1, offset, 1)


async def _ledger_of(tmp_path, entries: list[bytes]):
    factory = ManagedLedgerFactory(tmp_path, MemoryMetadataStore(), StorageConfig(max_entries_per_ledger=2))
    ledger = await factory.open("t")
    positions = [await ledger.append(data) for data in entries]
    return factory, ledger, positions


async def test_markers_filling_the_newest_ledgers_are_passed_over(tmp_path):
    factory, ledger, at = await _ledger_of(tmp_path, [_message(0), _message(1), _marker(2), _marker(3), _marker(4)])
    try:
        assert len({p.ledger_id for p in at}) == 3  # the markers fill a ledger and start another
        mid = await last_message_id(ledger, skip_markers=True)
        assert (mid.ledgerId, mid.entryId) == (at[1].ledger_id, at[1].entry_id)
    finally:
        await factory.close()


async def test_a_topic_of_markers_only_has_no_last_message(tmp_path):
    factory, ledger, at = await _ledger_of(tmp_path, [_marker(0), _marker(1), _marker(2)])
    try:
        mid = await last_message_id(ledger, skip_markers=True)
        assert mid.entryId == (1 << 64) - 1  # entry -1: what clients read as "no message"
    finally:
        await factory.close()
