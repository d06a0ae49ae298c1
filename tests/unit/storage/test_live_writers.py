"""``LiveWriters``: whether another broker's writer is alive (it may be
compacting its ledgers), one read per writer per second."""
from __future__ import annotations

import asyncio

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.object.live_writers import CHECK_EVERY_S, LiveWriters
from magnetar.storage.object.writer_fence import alive_key


class CountedGets(MemoryMetadataStore):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    async def get(self, key):
        self.gets += 1
        return await super().get(key)


def test_alive_others_only_and_one_read_per_writer_per_interval():
    async def run() -> None:
        store = CountedGets()
        now = [100.0]
        writers = LiveWriters(store, own=lambda: "me", clock=lambda: now[0])
        await store.put(alive_key("other"), b"{}", -1)
        await store.put(alive_key("me"), b"{}", -1)
        assert await writers.compacting("other") is True
        assert await writers.compacting("me") is False  # our own ledgers: we compact them ourselves
        assert await writers.compacting("gone") is False
        assert store.gets == 2  # none for our own
        for _ in range(100):  # a takeover's thousands of ledgers of one writer
            assert await writers.compacting("other") is True
        assert store.gets == 2
        await store.delete(alive_key("other"))
        assert await writers.compacting("other") is True  # the answer holds for CHECK_EVERY_S
        now[0] += CHECK_EVERY_S
        assert await writers.compacting("other") is False
        assert store.gets == 3
    asyncio.run(run())
