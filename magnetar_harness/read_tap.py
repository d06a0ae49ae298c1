"""A metadata store that counts the reads and writes made through it
(benchmarks and tests of how much a round or a load reads, or what a
rollover writes; a wrapper around a real store, not a fake: every call
goes on to it)."""
from __future__ import annotations

from magnetar.metadata import MetadataError, MetadataStore


class ReadTap(MetadataStore):
    """``inner`` with its read requests (``get``, ``children``,
    ``children_records``, ``keys_below``) counted in ``reads``, their keys kept in
    ``read_keys``; a read of a key under ``failing`` (a prefix) raises
    MetadataError instead, as an unreachable etcd would. Writes (``put``,
    ``delete``, ``increment``, ``transaction``) are kept in ``writes`` as
    tuples: ``("put", key)``, ``("delete", key)``, ``("increment", key,
    delta)``, ``("transaction", keys written)``; one to a key under
    ``failing_writes`` raises MetadataError. On etcd each is one
    round trip, an increment two (a Range, then a Txn).
    Watches and sessions go to ``inner`` untouched."""

    def __init__(self, inner: MetadataStore) -> None:
        self.inner = inner
        self.reads = 0
        self.read_keys: list[str] = []
        self.failing: str | None = None
        self.writes: list[tuple] = []
        self.failing_writes: str | None = None

    def _read(self, key: str) -> None:
        if self.failing is not None and key.startswith(self.failing):
            raise MetadataError(f"{key}: etcd unreachable (test)")
        self.reads += 1
        self.read_keys.append(key)

    async def get(self, key):
        self._read(key)
        return await self.inner.get(key)

    async def children(self, key):
        self._read(key)
        return await self.inner.children(key)

    async def keys_below(self, key):
        self._read(key)
        return await self.inner.keys_below(key)

    async def children_records(self, key, start="", limit=64):
        self._read(key)
        return await self.inner.children_records(key, start, limit)

    def _write(self, *call) -> None:
        keys = call[1] if call[0] == "transaction" else (call[1],)
        if self.failing_writes is not None and any(k.startswith(self.failing_writes) for k in keys):
            raise MetadataError(f"{call[1]}: etcd unreachable (test)")
        self.writes.append(call)

    async def put(self, key, value, expected_version=None, *, session=None):
        self._write("put", key)
        return await self.inner.put(key, value, expected_version, session=session)

    async def delete(self, key, expected_version=None):
        self._write("delete", key)
        await self.inner.delete(key, expected_version)

    async def increment(self, key, delta=1):
        self._write("increment", key, delta)
        return await self.inner.increment(key, delta)

    async def transaction(self, compares, writes, *, versions=True):
        self._write("transaction", tuple(w.key for w in writes))
        return await self.inner.transaction(compares, writes, versions=versions)

    def watch(self, prefix, callback):
        return self.inner.watch(prefix, callback)

    async def create_session(self, ttl_s=10.0):
        return await self.inner.create_session(ttl_s)

    async def close(self):
        await self.inner.close()
