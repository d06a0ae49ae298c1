"""The pool of segment-file descriptors: bounded, least recently used idle
ones closed first, pinned or unsynced ones never closed, reopened on use."""
from __future__ import annotations

import os

from magnetar.storage.handles import FileHandles


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


def test_pinned_and_unsynced_descriptors_stay_open_over_capacity(tmp_path):
    pool = FileHandles(capacity=1)
    paths = _files(tmp_path, 3)
    pinned = pool.open(paths[0], os.O_RDWR)
    fd = pinned.acquire()
    dirty = pool.open(paths[1], os.O_RDWR | os.O_APPEND)
    dfd = dirty.acquire()
    dirty.written()
    os.write(dfd, b"x")
    dirty.release()
    third = pool.open(paths[2], os.O_RDONLY)
    assert pinned._fd == fd and dirty._fd == dfd  # over capacity rather than close them
    assert pool.open_count == 3
    mark = dirty.dirty_mark()
    dfd = dirty.acquire()
    os.fdatasync(dfd)
    dirty.synced(mark)
    dirty.release()
    _read(third)
    pool.open(str(tmp_path / "f0"), os.O_RDONLY)  # the next open makes room
    assert dirty._fd < 0  # clean now: it may go
    pinned.release()


def test_closed_for_good_after_the_last_use(tmp_path):
    pool = FileHandles(capacity=2)
    h = pool.open(_files(tmp_path, 1)[0], os.O_RDONLY)
    fd = h.acquire()
    h.close()
    assert os.pread(fd, 1, 0) == b"0"  # still usable while pinned
    h.release()
    assert pool.open_count == 0 and h.closed
