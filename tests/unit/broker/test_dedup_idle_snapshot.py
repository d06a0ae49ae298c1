"""A topic's final snapshot is not written when it is what the store holds
(a topic unchanged since its load: a clean stop writes nothing for it)."""
from __future__ import annotations

import json

from magnetar.broker.topics.dedup import Deduplicator
from magnetar.metadata.memory import MemoryMetadataStore


class _EmptyLog:
    def first_position(self):
        return None

    def next_position(self, position):
        return None


async def test_an_unchanged_snapshot_is_not_written_again():
    store = await MemoryMetadataStore.open()
    loaded = Deduplicator(store, "t/ns/persistent/x", enabled=True)
    await store.put(loaded.key, json.dumps({"position": None, "names": {}, "pids": {}}).encode())
    version = (await store.get(loaded.key)).version
    await loaded.recover(_EmptyLog())
    await loaded.close()
    assert (await store.get(loaded.key)).version == version
