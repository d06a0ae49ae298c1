"""Large segment writes with ``O_DIRECT``: their bytes reach the disk without new page-cache pages.

A ledger's large write of a round (:mod:`.direct_sync` chooses them:
``journal_direct_bytes`` or more, the largest four) is fdatasynced in its
segment file. Written through the page cache, each of its pages is a page
the kernel takes and fills; on a virtual machine that reports free pages to
its host, a page touched for the first time costs a host fault (~14 us a
page here), and that copy was most of a Spark batch write's broker time.
:class:`DirectWriter` writes such a write with ``O_DIRECT`` from one
page-aligned buffer it reuses, so the disk gets the bytes from memory the
broker touched before:

- the write starts at the block (:data:`BLOCK`, 4096 bytes) holding the
  file's end: the partial block's bytes already in the file are read back
  (``pread``, usually from the page cache: the last write's tail) and
  written again in front of the new ones, unchanged;
- the whole blocks go by ``pwrite`` on a descriptor of the file opened
  ``O_DIRECT`` (not ``O_APPEND``: the offset is the aligned one), in pieces
  of at most the buffer's size;
- the partial last block (under 4096 bytes) is appended through the
  ledger's own descriptor (page cache): the file's size is exact after
  every write, no padding, no truncation, and the next write reads that
  block back as its head.

Durability is the caller's, unchanged: ``O_DIRECT`` does not flush the
disk's write cache nor commit the file's new size, so the segment is still
fdatasynced (:class:`.direct_sync.DirectSyncs`) before any receipt. A power
loss in the middle of the head block's rewrite leaves each sector old or
new, and its old bytes are the same as its new ones.

Readers: the kernel writes back and drops the page-cache pages of the
range first, so a reader on another thread sees the same bytes before and
after; later reads of the range come from the disk (recent entries are
usually served by the managed ledger's tail cache).

Failures: a write that fails (EIO, ENOSPC, a short write) raises
``OSError``; the caller cuts the file back and fences that ledger only, as
for a buffered write. A filesystem that refuses ``O_DIRECT`` (``EINVAL`` at
open or at the first block) turns the writer off for good: the write goes
through the page cache instead, and this is logged once.
:func:`refusal` says at start-up why a directory gets no direct writes
(tmpfs and ramfs: files live in memory, ``O_DIRECT`` would save nothing).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import mmap
import os
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

#: Alignment of offsets, lengths and the buffer (a page; a multiple of every
#: common logical block size).
BLOCK = 4096
#: The reused buffer grows to a write's size up to this; larger writes go in pieces.
MAX_BUFFER = 32 * 1024 * 1024

_MEMORY_FILESYSTEMS = {0x01021994: "tmpfs", 0x858458F6: "ramfs"}
_O_DIRECT = getattr(os, "O_DIRECT", 0)


def _filesystem_type(directory: str) -> int | None:
    """statfs(2)'s f_type of ``directory``, or None if it cannot be had."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        buf = ctypes.create_string_buffer(256)  # struct statfs: f_type is its first long
        if libc.statfs(os.fsencode(directory), buf) != 0:
            return None
        return ctypes.c_long.from_buffer(buf).value
    except (OSError, AttributeError):
        return None


def refusal(directory: str) -> str | None:
    """Why segment files in ``directory`` get no ``O_DIRECT`` writes, or
    None: its filesystem keeps files in memory, or refuses ``O_DIRECT``
    (tried once with one aligned block in a scratch file, removed)."""
    if not _O_DIRECT:
        return "this system has no O_DIRECT"
    kind = _MEMORY_FILESYSTEMS.get(_filesystem_type(directory) or 0)
    if kind is not None:
        return f"its filesystem is {kind} (files in memory: O_DIRECT saves nothing)"
    path = os.path.join(directory, f"direct-io-probe-{secrets.token_hex(6)}.tmp")
    block = mmap.mmap(-1, BLOCK)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_DIRECT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, block, 0)
        finally:
            os.close(fd)
    except OSError as exc:
        return f"its filesystem refuses O_DIRECT ({exc.strerror or exc})"
    finally:
        block.close()
        try:
            os.unlink(path)
        except OSError:
            pass
    return None


class DirectWriter:
    """Writes records at a segment file's end with ``O_DIRECT`` (see the
    module docstring). One per group-commit writer, called from its thread:
    :meth:`write_many` writes a round's ledgers on ``most`` threads at once
    (a direct write waits for the disk; two ledgers' writes one after the
    other waited twice), each thread with its own buffer. ``writes`` and
    ``bytes`` count what went direct."""

    def __init__(self, max_buffer: int = MAX_BUFFER, most: int = 4) -> None:
        self.enabled = True
        self._max_buffer = max(BLOCK, max_buffer - max_buffer % BLOCK)
        self._local = threading.local()
        self._buffers: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, most), thread_name_prefix="magnetar-direct-write")
        self.writes = 0
        self.bytes = 0

    def write_many(self, items: list[tuple[str, int, int, bytes]]) -> list[OSError | None]:
        """:meth:`write` for each ``(path, fd, size, data)`` of ``items``
        (different files), at once on threads; per item None or its error."""
        if len(items) == 1:
            return [_attempt(self.write, *items[0])]
        futures = [self._pool.submit(_attempt, self.write, *item) for item in items]
        return [f.result() for f in futures]

    def _buffer(self, nbytes: int) -> mmap.mmap:
        want = min(self._max_buffer, -(-nbytes // (1 << 20)) * (1 << 20))
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < want:
            new = mmap.mmap(-1, want)  # anonymous: page-aligned, this thread's from now on
            with self._lock:
                if buf is not None:
                    self._buffers.remove(buf)
                    buf.close()
                self._buffers.append(new)
            self._local.buf = buf = new
        return buf

    def write(self, path: str, fd: int, size: int, data: bytes) -> None:
        """Append ``data`` to the file at ``path`` whose size is ``size``;
        ``fd`` is its ordinary (``O_APPEND``) descriptor. Raises
        ``OSError`` if the write failed (the file may hold part of it: the
        caller cuts it back to ``size``). Falls back to an ordinary write,
        turning itself off, if the filesystem refuses ``O_DIRECT``."""
        start = size - size % BLOCK
        head = size - start
        body = (head + len(data)) // BLOCK * BLOCK
        if not self.enabled or body == 0:
            _append(fd, memoryview(data))
            return
        try:
            dfd = os.open(path, os.O_WRONLY | _O_DIRECT | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            self._refused(path, exc)
            _append(fd, memoryview(data))
            return
        try:
            taken = self._write_blocks(fd, dfd, path, start, head, body, data)
        finally:
            os.close(dfd)
        _append(fd, memoryview(data)[taken:])

    def _write_blocks(self, fd: int, dfd: int, path: str, start: int, head: int, body: int, data: bytes) -> int:
        """pwrite the whole blocks from ``start``; how many bytes of ``data`` they took."""
        buf = self._buffer(body)
        view = memoryview(buf)
        src = memoryview(data)
        taken = 0
        at = start
        while at < start + body:
            piece = min(len(buf), start + body - at)
            fill = 0
            if at == start and head:
                if os.preadv(fd, [view[:head]], start) != head:
                    raise OSError(errno.EIO, f"short read of the last block of {path}")
                fill = head
            n = piece - fill
            view[fill:piece] = src[taken:taken + n]
            written = 0
            while written < piece:
                try:
                    got = os.pwrite(dfd, view[written:piece], at + written)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and at == start and written == 0:
                        self._refused(path, exc)  # nothing of this write is in the file yet
                        return 0
                    raise
                if got <= 0 or got % BLOCK and written + got < piece:
                    raise OSError(errno.EIO, f"short direct write to {path}")
                written += got
            taken += n
            at += piece
        with self._lock:
            self.writes += 1
            self.bytes += body
        return taken

    def _refused(self, path: str, exc: OSError) -> None:
        self.enabled = False
        log.warning("the filesystem of %s refuses O_DIRECT (%s): large segment writes go through the page "
                    "cache from now on", os.path.dirname(path), exc.strerror or exc)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            for buf in self._buffers:
                try:
                    buf.close()
                except BufferError:  # a failed write's traceback still holds a view: the collector frees it
                    pass
            self._buffers.clear()


def _attempt(write, path: str, fd: int, size: int, data: bytes) -> OSError | None:
    try:
        write(path, fd, size, data)
    except OSError as exc:
        return exc
    return None


def _append(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]
