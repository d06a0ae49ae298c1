"""A topic's final snapshot is not written again when it is what the store
holds (a topic idle since its load: a clean stop writes nothing for it)."""
from __future__ import annotations

from magnetar.broker.topics.dedup import Deduplicator
from magnetar.metadata.memory import MemoryMetadataStore


class _EmptyLog:
    def first_position(self):
        return None

    def next_position(self, position):
        return None


async def test_an_unchanged_snapshot_is_not_written_again():
    store = await MemoryMetadataStore.open()
    first = Deduplicator(store, "t/ns/persistent/x", enabled=True)
    await first.recover(_EmptyLog())
    await first.snapshot()
    version = (await store.get(first.key)).version

    loaded = Deduplicator(store, "t/ns/persistent/x", enabled=True)
    await loaded.recover(_EmptyLog())
    await loaded.close()
    assert (await store.get(first.key)).version == version
