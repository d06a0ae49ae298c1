"""The append path makes no object per hand-over that outlives the batch:
its two buffers are kept (the batch gets copies) and the batch is its own
callback. At 10,000 written topics, fresh buffers per hand-over lived until
each ledger's next append and were two of every five objects the
collector's young passes walked (docs/object-storage.md)."""
from __future__ import annotations

import asyncio

from magnetar.storage.append_path import AppendBatch


async def test_a_hand_over_keeps_the_buffers_and_hands_the_batch_as_callback(factories, wait_until):
    ml = await factories().open("t")
    path = ml._appends
    buffers = (path._buf, path._buf_futures)
    told = []
    for i in range(3):
        ml.append_then(b"entry-%d" % i, lambda lid, first, count, err: told.append((lid, first, count, err)))
        await wait_until(lambda: sum(c for _, _, c, _ in told) == i + 1, what=f"entry {i} stored")
        assert (path._buf, path._buf_futures) == buffers and path._buf is buffers[0] \
            and path._buf_futures is buffers[1]
    assert all(err is None for *_, err in told)
    assert ml.last_confirmed is not None and ml.last_confirmed.entry_id == 2

    ml.append_then(b"more", lambda *a: None)
    handle, datas, nbytes, callback = path.take()
    assert type(callback) is AppendBatch and callback.futures is not buffers[1] and datas is not buffers[0]
    assert path._buf is buffers[0] and path._buf == [] and path._buf_futures == []
    path._backend.submit(handle, datas, callback, asyncio.get_running_loop())  # as the flush pass would
    await wait_until(lambda: ml.last_confirmed.entry_id == 3, what="the batch stored, told through itself")
