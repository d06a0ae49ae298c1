"""The flush pass (magnetar/storage/flush_pass.py): the appends of every
managed ledger of a factory reach the backend in one ``submit_many`` per
loop pass, each ledger's in call order, and a refusal reaches them all."""
from __future__ import annotations

import asyncio

from magnetar.storage import StorageError
from magnetar.storage.flush_pass import FlushPass


async def test_one_pass_hands_every_ledgers_appends_over_in_one_call(factories):
    factory = factories()
    mls = [await factory.open(f"t{i}") for i in range(20)]
    calls: list[list[tuple]] = []
    submit_many = factory.backend.submit_many

    def counting(writes, loop):
        calls.append(writes)
        submit_many(writes, loop)

    factory.backend.submit_many = counting
    futures = [ml.append(f"{ml.name}-{j}".encode()) for j in range(3) for ml in mls]  # one pass
    positions = await asyncio.wait_for(asyncio.gather(*futures), 30)
    assert len(calls) == 1  # not one per ledger
    assert sorted(len(datas) for _, datas, _, _ in calls[0]) == [3] * 20
    for i, ml in enumerate(mls):  # each ledger's entries in call order
        mine = [positions[j * 20 + i] for j in range(3)]
        assert [p.entry_id for p in mine] == [0, 1, 2]
        assert [e.data for e in await ml.read_entries(mine[0], 3)] == [f"t{i}-{j}".encode() for j in range(3)]


class _Buffered:
    def __init__(self, handle, told: list) -> None:
        self.handle, self.told = handle, told

    def take(self):
        return self.handle, [b"x"], 9, self.told.append


async def test_a_stopped_backend_fails_every_batch_of_the_pass(place):
    backend = await place.open()
    handles = [await backend.create(i) for i in (1, 2, 3)]
    await backend.close()
    told: list = []
    flushes = FlushPass(backend, asyncio.get_running_loop())
    for handle in handles:
        flushes.add(_Buffered(handle, told))
    flushes.run()
    assert len(told) == 3 and all(isinstance(error, StorageError) for error in told)
