"""Large segment writes with O_DIRECT (storage/file/direct_io.py), on real files.

What is checked: a large write leaves (almost) no page-cache pages for its
range (``mincore`` of the segment file); the bytes are the same as a
buffered write's at every alignment, through a kill -9 and a power loss
(the segment cut back to its last fdatasync, as in
test_storage_direct_sync.py); a failed direct write fails and fences that
ledger only; a filesystem that keeps files in memory (tmpfs) gets buffered
writes, said once at start-up."""
from __future__ import annotations

import asyncio
import ctypes
import errno
import fcntl
import logging
import mmap
import os
import tempfile
from pathlib import Path

import pytest

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig, StorageError
from magnetar.storage.file import direct_io
from tests.helpers import opened_factories

from .test_storage_direct_sync import BIG, NEVER_S, SyncedSizes, _read_all

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def cached_pages(path: Path) -> tuple[int, int]:
    """(pages of ``path`` in the page cache, pages of the file), by mincore(2)."""
    size = path.stat().st_size
    pages = -(-size // mmap.PAGESIZE)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        try:
            vec = (ctypes.c_ubyte * pages)()
            assert _libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
            return sum(b & 1 for b in vec), pages
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


@pytest.fixture
def disk_dir(tmp_path):
    """A data directory on a disk filesystem (tmp_path, unless it is tmpfs)."""
    if direct_io.refusal(str(tmp_path)) is None:
        yield tmp_path / "data"
        return
    with tempfile.TemporaryDirectory(dir="/var/tmp") as scratch:
        assert direct_io.refusal(scratch) is None, "no filesystem here takes O_DIRECT"
        yield Path(scratch) / "data"


@pytest.fixture
async def on_disk(disk_dir):
    async with opened_factories(disk_dir, MemoryMetadataStore()) as make:
        yield make


def _segments(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "ledgers").glob("*.log"))


async def test_a_large_write_leaves_no_page_cache_pages_for_its_range(on_disk, disk_dir):
    factory = on_disk(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    for i in range(4):
        await ml.append(bytes([i]) * (4 * BIG))  # 1.2 MB a write, 293 pages
    assert factory.backend.writer.direct_writer.writes == 4
    (segment,) = _segments(disk_dir)
    cached, pages = cached_pages(segment)
    assert pages > 1000
    assert cached <= 2  # the last write's partial block, and at most one more
    assert factory.backend.journal.bytes_written < BIG  # and nothing of them in the journal


async def test_with_segment_direct_io_off_the_same_write_is_all_page_cache(on_disk, disk_dir):
    factory = on_disk(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S, segment_direct_io=False)
    ml = await factory.open("t")
    await ml.append(b"x" * (4 * BIG))
    assert factory.backend.writer.direct_writer is None
    (segment,) = _segments(disk_dir)
    cached, pages = cached_pages(segment)
    assert cached == pages


async def test_every_alignment_reads_back_the_same_through_kill_and_power_loss(on_disk, disk_dir, monkeypatch):
    disk = SyncedSizes(monkeypatch)
    factory = on_disk(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    ml = await factory.open("t")
    acked = []
    # Small (journaled, buffered) and large (direct) writes interleaved, so
    # each large one starts at a different offset within its first block.
    for i, size in enumerate([1, BIG + 1, 4095, BIG, 7, 2 * BIG + 4093, 4096, BIG + 4097, 100, 3 * BIG]):
        data = bytes([i % 251 + 1]) * size
        await ml.append(data)
        acked.append(data)
    assert factory.backend.writer.direct_writer.writes == 5
    assert await _read_all(ml) == acked
    factory.abandon()  # kill -9, then the power loss
    disk.power_loss(disk_dir)
    again = on_disk()
    assert await _read_all(await again.open("t")) == acked


async def test_a_failed_direct_write_fails_and_fences_that_ledger_only(on_disk, disk_dir, monkeypatch):
    factory = on_disk(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    ml, other = await factory.open("t"), await factory.open("u")
    await ml.append(b"ok")
    broken = ml.ledgers[-1].ledger_id
    real_pwrite = os.pwrite

    def pwrite(fd, data, offset):  # os.pwrite is the journal's too: only O_DIRECT descriptors fail
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(direct_io.os, "pwrite", pwrite)
    with pytest.raises(StorageError):
        await ml.append(b"z" * BIG)
    await other.append(b"fine")  # a small write of another ledger: untouched
    monkeypatch.setattr(direct_io.os, "pwrite", real_pwrite)
    later = await ml.append(b"later")
    assert later.ledger_id > broken  # the failed ledger was fenced; the managed ledger rolled over
    assert await _read_all(ml) == [b"ok", b"later"]
    assert await _read_all(other) == [b"fine"]
    factory.abandon()
    assert await _read_all(await on_disk().open("t")) == [b"ok", b"later"]


async def test_on_tmpfs_large_writes_are_buffered_and_the_start_says_so_once(caplog):
    if direct_io._filesystem_type("/dev/shm") != 0x01021994:
        raise AssertionError("/dev/shm is not tmpfs on this machine")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as scratch:
        caplog.set_level(logging.WARNING, logger="magnetar.storage.file.file_backend")
        factory = ManagedLedgerFactory(Path(scratch), MemoryMetadataStore(),
                                       StorageConfig(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S))
        try:
            ml = await factory.open("t")
            for i in range(3):
                await ml.append(bytes([i]) * BIG)
            assert factory.backend.writer.direct_writer is None
            assert factory.backend.writer.durability.direct_syncs == 3  # still written once, synced in place
            assert await _read_all(ml) == [bytes([i]) * BIG for i in range(3)]
        finally:
            await factory.close()
        said = [r.getMessage() for r in caplog.records if "O_DIRECT" in r.getMessage()]
        assert len(said) == 1 and "tmpfs" in said[0] and "page cache" in said[0]


async def test_a_rounds_large_writes_go_direct_at_once_and_all_read_back_after_a_power_loss(on_disk, disk_dir,
                                                                                             monkeypatch):
    disk = SyncedSizes(monkeypatch)
    factory = on_disk(sync_policy="always", journal_checkpoint_interval_ms=NEVER_S)
    mls = [await factory.open(f"t{i}") for i in range(6)]
    for ml in mls:
        await ml.append(b"head")  # each large write below starts 12 bytes into a block
    await asyncio.gather(*(ml.append(bytes([i + 1]) * (BIG + i)) for i, ml in enumerate(mls)))
    assert factory.backend.writer.direct_writer.writes >= 4
    factory.abandon()
    disk.power_loss(disk_dir)
    again = on_disk()
    for i in range(6):
        assert await _read_all(await again.open(f"t{i}")) == [b"head", bytes([i + 1]) * (BIG + i)]
