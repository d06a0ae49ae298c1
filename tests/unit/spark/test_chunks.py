"""The chunk pre-pass (pyspark_magnetar.chunks): whole messages out of
interleaved chunks, nothing for an incomplete one, orphans completed by
leading chunks read from before a range."""
from __future__ import annotations

import zlib

from magnetar.protocol import pb

from pyspark_magnetar.chunks import ChunkAssembler, is_chunk
from pyspark_magnetar.entry_columns import decode_entries_python, entries_to_batch
from pyspark_magnetar.offsets import TopicPartition


def _chunks(producer: str, uuid: str, whole: bytes, n: int, *, compress: bool = False):
    body = zlib.compress(whole) if compress else whole
    size = -(-len(body) // n)
    out = []
    for i in range(n):
        m = pb.MessageMetadata(producer_name=producer, sequence_id=1, publish_time=1000, uuid=uuid, chunk_id=i,
                               num_chunks_from_msg=n, total_chunk_msg_size=len(body), partition_key=uuid)
        m.properties.add(key="p", value=uuid)
        if compress:
            m.compression = pb.ZLIB
            m.uncompressed_size = len(whole)
        out.append((m, body[i * size:(i + 1) * size]))
    return out


def test_interleaved_producers_give_whole_messages_at_their_last_chunk():
    a = _chunks("pa", "ua", b"A" * 100, 3, compress=True)
    b = _chunks("pb", "ub", bytes(range(90)), 2)
    stream = [a[0], b[0], a[1], b[1], a[2]]
    asm = ChunkAssembler()
    out = [(off, asm.add(m, p, off)) for off, (m, p) in enumerate(stream)]
    done = [(off, e) for off, e in out if e is not None]
    assert [off for off, _ in done] == [3, 4]
    assert bytes(done[0][1].payload) == bytes(range(90)) and bytes(done[1][1].payload) == b"A" * 100
    meta = pb.MessageMetadata.FromString(done[1][1].metadata)
    assert not is_chunk(meta) and not meta.HasField("uuid") and meta.partition_key == "ua"
    batch = entries_to_batch(TopicPartition("persistent://public/default/t"), [e for _, e in done], 3, 5)
    assert batch.column("value").to_pylist() == [bytes(range(90)), b"A" * 100]
    assert batch.column("offset").to_pylist() == [3, 4]
    decode_entries_python([e for _, e in done], 3, 5)  # the twin takes them too


def test_incomplete_message_gives_no_row():
    dead = _chunks("p", "u1", b"x" * 50, 3)
    again = _chunks("p", "u2", b"y" * 50, 2)
    asm = ChunkAssembler()
    assert asm.add(*dead[0], 0) is None and asm.add(*dead[1], 1) is None  # the producer died here
    assert asm.add(*again[0], 2) is None
    assert bytes(asm.add(*again[1], 3).payload) == b"y" * 50
    gap = _chunks("q", "u3", b"z" * 60, 3)
    asm.add(*gap[0], 4)
    assert asm.add(*gap[2], 5) is None  # chunk 1 missing


def test_message_split_across_a_range_boundary_is_completed_by_read_back():
    msg = _chunks("p", "u", b"0123456789" * 10, 4)
    asm = ChunkAssembler()  # the range starts at chunk 2
    assert asm.missing_before(msg[2][0]) == 2
    assert asm.add(*msg[2], 12) is None
    assert asm.missing_before(msg[3][0]) == 2
    asm.prepend(("p", "u"), [msg[0][1], msg[1][1]])
    whole = asm.add(*msg[3], 13)
    assert bytes(whole.payload) == b"0123456789" * 10 and whole.first_offset == 13
    # without the read-back the orphan never completes
    other = ChunkAssembler()
    other.add(*msg[2], 12)
    assert other.add(*msg[3], 13) is None
