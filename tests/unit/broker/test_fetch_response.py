"""The FETCH_ENTRIES_RESPONSE frame as pieces for the socket."""
from __future__ import annotations

import struct

import pytest

from magnetar.broker.server.handlers.fetch import WRITE_AS_PIECES, response
from magnetar.protocol.frames import FrameDecoder
from magnetar.storage.position import Position


@pytest.mark.parametrize("entries", [1, WRITE_AS_PIECES, WRITE_AS_PIECES + 1, 5000])
def test_the_pieces_are_one_frame_of_the_entries_in_order(entries):
    datas = [bytes([i % 251]) * (i % 300) for i in range(entries)]
    pieces = response(7, [(3, 10, datas[:entries // 2]), (4, 0, datas[entries // 2:])], Position(3, 10))
    # a few entries (batches) go out as their own buffers, not copied into one
    assert len(pieces) == (2 + entries if entries <= WRITE_AS_PIECES else 2)
    decoder = FrameDecoder()
    decoder.feed(b"".join(pieces))
    frame = decoder.next_frame()
    reply = frame.command.fetchEntriesResponse
    assert (reply.request_id, reply.num_entries, reply.next_ledger_id, reply.next_entry_id) == \
        (7, entries, 4, entries - entries // 2)
    raw = bytes(frame.block.raw)
    sizes = struct.unpack_from(f">I{entries}I", raw)
    assert sizes == (entries, *map(len, datas))
    assert raw[4 + 4 * entries:] == b"".join(datas)
    assert decoder.next_frame() is None
