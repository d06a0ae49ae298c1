"""The pool of segment-file descriptors: bounded, least recently used idle
ones closed first, pinned or unsynced ones never closed, reopened on use."""
from __future__ import annotations

import os

from magnetar.storage.file.handles import FileHandles


def _files(tmp_path, n):
    paths = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"%d" % i)
        paths.append(str(p))
    return paths


def _read(handle) -> bytes:
    fd = handle.acquire()
    try:
        return os.pread(fd, 16, 0)
    finally:
        handle.release()


def test_at_most_capacity_open_and_every_file_still_reads(tmp_path):
    pool = FileHandles(capacity=3)
    handles = [pool.open(p, os.O_RDONLY) for p in _files(tmp_path, 10)]
    assert pool.open_count == 3
    for i, h in enumerate(handles):
        assert _read(h) == b"%d" % i
        assert pool.open_count <= 3
    assert pool.reopens >= 7


def test_the_least_recently_used_goes_first(tmp_path):
    pool = FileHandles(capacity=2)
    a, b = (pool.open(p, os.O_RDONLY) for p in _files(tmp_path, 2))
    _read(a)  # b is now the least recently used
    pool.open(_files(tmp_path / "..", 1)[0], os.O_RDONLY)
    assert a._fd >= 0 and b._fd < 0


def test_a_pinned_descriptor_stays_open_over_capacity_and_an_unsynced_one_is_synced_then_closed(tmp_path):
    pool = FileHandles(capacity=1)
    paths = _files(tmp_path, 3)
    pinned = pool.open(paths[0], os.O_RDWR)
    fd = pinned.acquire()
    dirty = pool.open(paths[1], os.O_RDWR | os.O_APPEND)
    dfd = dirty.acquire()
    dirty.written()
    os.write(dfd, b"x")
    dirty.release()
    assert pool.open_count == 2  # over capacity: the pinned one cannot go
    pool.open(paths[2], os.O_RDONLY)
    assert pinned._fd == fd  # still pinned: kept
    assert dirty._fd < 0 and not dirty._dirty  # fsynced by the pool, then closed
    assert _read(dirty) == b"1x"  # reopened on use, the write is there
    dirty.synced(dirty.dirty_mark())  # no error was kept for it
    pinned.release()


def test_closed_for_good_after_the_last_use(tmp_path):
    pool = FileHandles(capacity=2)
    h = pool.open(_files(tmp_path, 1)[0], os.O_RDONLY)
    fd = h.acquire()
    h.close()
    assert os.pread(fd, 1, 0) == b"0"  # still usable while pinned
    h.release()
    assert pool.open_count == 0 and h.closed


async def test_a_group_commit_over_more_ledgers_than_the_pool_holds_stays_within_it(tmp_path):
    from magnetar.metadata.memory import MemoryMetadataStore
    from magnetar.storage import ManagedLedgerFactory, StorageConfig
    import asyncio

    factory = ManagedLedgerFactory(tmp_path, MemoryMetadataStore(), StorageConfig(max_open_ledger_files=4))
    try:
        mls = [await factory.open(f"t/ns/persistent/x{i}") for i in range(50)]
        await asyncio.gather(*(ml.append(b"burst") for ml in mls))  # one round writes them all
        assert factory.backend.handles.open_count <= 4
        for ml in mls:
            assert [e.data for e in await ml.read_entries(ml.first_position(), 5)] == [b"burst"]
        assert factory.backend.handles.open_count <= 4
    finally:
        await factory.close()
