"""One store made of two: the cluster's own metadata store and the
configuration store that several clusters (regions) share.

Pulsar keeps what every region must agree on (clusters, tenants, namespace
policies, partitioned-topic metadata) in a *configuration store*, and what is
one cluster's business (ledgers, cursors, bundle owners, sessions) in that
cluster's *metadata store*. :class:`RoutedStore` gives the broker both behind
the one :class:`~magnetar.metadata.store.MetadataStore` interface it already
uses: a key at or below one of ``shared_prefixes`` goes to the configuration
store, every other key to the local one. Callers do not change.

Contract and failure modes:

- A key belongs to exactly one store, so versions, compare-and-set and
  counters keep their meaning.
- ``children`` of a key above a shared prefix (``/`` or ``/admin`` when
  ``/admin/clusters`` is shared) merges both stores' answers.
- ``watch`` subscribes to whichever store(s) can hold keys under the prefix.
- Sessions (ephemeral keys) live in the local store: an ephemeral key under a
  shared prefix is refused with ValueError, since a region's broker must not
  own records every region reads.
- ``close`` closes both stores. Errors of either store propagate unchanged.
"""
from __future__ import annotations

from typing import Callable

from .store import MetadataStore, Notification, Record, MetadataSession, Watch, check_transaction, key_matches


class RoutedStore(MetadataStore):
    def __init__(self, local: MetadataStore, configuration: MetadataStore, shared_prefixes: tuple[str, ...]) -> None:
        self.local = local
        self.configuration = configuration
        self.shared_prefixes = tuple(p.rstrip("/") for p in shared_prefixes)

    def _shared(self, key: str) -> bool:
        return any(key_matches(prefix, key) for prefix in self.shared_prefixes)

    def _above_shared(self, key: str) -> bool:
        """Some shared prefix lies strictly below ``key``."""
        return any(prefix != key.rstrip("/") and key_matches(key, prefix) for prefix in self.shared_prefixes)

    def _store(self, key: str) -> MetadataStore:
        return self.configuration if self._shared(key) else self.local

    async def get(self, key: str) -> Record | None:
        return await self._store(key).get(key)

    async def put(self, key: str, value: bytes, expected_version: int | None = None, *,
                  session: MetadataSession | None = None) -> int:
        if session is not None and self._shared(key):
            raise ValueError(f"{key} is in the configuration store, shared by every cluster: it cannot be ephemeral")
        return await self._store(key).put(key, value, expected_version, session=session)

    async def delete(self, key: str, expected_version: int | None = None) -> None:
        await self._store(key).delete(key, expected_version)

    async def transaction(self, compares, writes, *, versions: bool = True) -> list[int | None]:
        compares, writes = check_transaction(compares, writes)
        keys = [c.key for c in compares] + [w.key for w in writes]
        stores = {id(self._store(k)): self._store(k) for k in keys}
        if len(stores) > 1:
            raise ValueError("a transaction cannot span the local and the configuration store")
        store = next(iter(stores.values()), self.local)
        return await store.transaction(compares, writes, versions=versions)

    async def children(self, key: str) -> list[str]:
        if self._above_shared(key):
            names = set(await self.local.children(key)) | set(await self.configuration.children(key))
            return sorted(names)
        return await self._store(key).children(key)

    async def children_records(self, key: str, start: str = "", limit: int = 64) -> list[Record]:
        if self._above_shared(key):
            return await super().children_records(key, start, limit)
        return await self._store(key).children_records(key, start, limit)

    async def keys_below(self, key: str) -> list[str]:
        if self._above_shared(key):
            return await super().keys_below(key)
        return await self._store(key).keys_below(key)

    async def increment(self, key: str, delta: int = 1) -> int:
        return await self._store(key).increment(key, delta)

    def watch(self, prefix: str, callback: Callable[[Notification], None]) -> Watch:
        if self._above_shared(prefix):
            watches = [self.local.watch(prefix, callback), self.configuration.watch(prefix, callback)]
            return Watch(lambda: [w.cancel() for w in watches])
        return self._store(prefix).watch(prefix, callback)

    async def create_session(self, ttl_s: float = 10.0) -> MetadataSession:
        return await self.local.create_session(ttl_s)

    async def close(self) -> None:
        try:
            await self.local.close()
        finally:
            await self.configuration.close()
