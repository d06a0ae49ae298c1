"""Rebuilding deduplication from the log (a restart, a new owner) keys a
replicated entry by the replicator that sent it, even when the entry was
written by an idempotent producer in its own region and still carries that
producer's pid: otherwise the replicator's resends after a restart are
stored twice (found by ``magnetar-chaos run --topology regions``)."""
from __future__ import annotations

from magnetar.broker.entries.entry_format import build_entry_python
from magnetar.broker.topics.dedup import Deduplicator
from magnetar.broker.topics.replicators import replicator_cursor, source_sequence
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.protocol import pb
from magnetar.protocol.frames import checksummed_block
from magnetar.replication.replicator import stamped


def _entry(md: pb.MessageMetadata, offset: int) -> bytes:
    return build_entry_python(checksummed_block(md.SerializeToString(), b"x"), 1, offset, 1)


def test_a_replicated_entry_of_an_idempotent_producer_moves_the_replicators_highwater():
    original = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, magnetar_pid=42,
                                  magnetar_generation=3, magnetar_sequence=790)
    stored = pb.MessageMetadata.FromString(stamped(original, "region-a", 5, 790))
    dedup = Deduplicator(MemoryMetadataStore(), "t", enabled=True)
    dedup._replay(_entry(stored, 0))
    replicator = dedup.names.get(replicator_cursor("region-a"))
    assert replicator is not None and replicator.highwater == source_sequence(5, 790)
    assert 42 not in dedup.pids  # the pid is region A's producer's, not a writer of this topic


def test_an_idempotent_producers_own_entry_still_moves_its_pid():
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1, magnetar_pid=42,
                            magnetar_generation=3, magnetar_sequence=7)
    dedup = Deduplicator(MemoryMetadataStore(), "t", enabled=True)
    dedup._replay(_entry(md, 0))
    assert dedup.pids[42].highwater == 7 and dedup.pids[42].generation == 3
