"""A bounded pool of open file descriptors: segment files of idle ledgers
are closed and opened again on demand, so open files stay bounded whatever
the number of ledgers (topics).

:class:`FileHandles` keeps at most ``capacity`` files open, least recently
used first to go. A :class:`Handle` is one file, open or not; ``acquire()``
gives an open descriptor (opening the file again if the pool closed it) and
pins it until ``release()``. Readers on threads, the group-commit writer and
the periodic syncer all go through it; a pinned descriptor is never closed
under them.

Durability: a descriptor is closed by the pool only when *clean*: nothing
written through it since its last successful fsync (``written`` /
``synced``), or after the pool fsyncs it itself. Linux reports a failed write-back to the descriptors open when
it happened, not to ones opened later; closing a descriptor with unsynced
writes could turn an fsync error into a silent success on the next one. With
sync policy ``never`` nothing is promised, so dirty descriptors may go too.

A dirty descriptor the pool must close anyway (a group commit wrote more
ledgers than it holds) is fdatasync'ed first; a failure of that fsync is
raised by the ledger's next ``synced``, so it reaches the waiting appends.
When every open descriptor is pinned the pool goes over its capacity rather
than fail; when the operating system refuses to open
(EMFILE, ENFILE) it closes what it can and tries once more, then raises
the ``OSError``. Thread-safe.
"""
from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict

from . import round_io

#: Descriptors of segment files open at once when the pool is sized by hand
#: (StorageConfig.max_open_ledger_files > 0) and nothing is said.
DEFAULT_CAPACITY = 512
#: Sized from the open-file limit (max_open_ledger_files = 0, the default):
#: half of the limit, the other half left to connections and the rest, at
#: most this many (a hard limit of 1,048,576 is common under systemd).
AUTO_MAX_CAPACITY = 32768
#: Below this (half the limit) the pool churns at a few hundred written
#: topics: said at start.
AUTO_LOW_CAPACITY = 512

_NO_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)

#: Descriptors a broker needs besides segment files: client connections,
#: the metadata store, index files being written, the admin listener.
OTHER_FILES = 256


def capacity_within_limit(wanted: int) -> tuple[int, str | None]:
    """How many segment files to keep open, given the setting ``wanted`` and
    the process's open-file limit (RLIMIT_NOFILE), and a one-line warning to
    log (None when all is well).

    ``wanted`` 0 (the default): the soft limit is raised to the hard one and
    the pool is half of it (at most :data:`AUTO_MAX_CAPACITY`); a limit that
    leaves fewer than :data:`AUTO_LOW_CAPACITY` is said. Otherwise the soft
    limit is raised toward the hard one when ``wanted`` plus
    :data:`OTHER_FILES` needs it; if it is still lower, half of it, said."""
    if wanted == 0:
        return _capacity_from_limit()
    needed = wanted + OTHER_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if raised > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
                soft = raised
            except (ValueError, OSError):
                pass
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return wanted, None
    capacity = max(8, soft // 2)
    return capacity, (f"the open-file limit (ulimit -n) is {soft}, below the {needed} that "
                      f"max_open_ledger_files = {wanted} needs: keeping at most {capacity} segment files open "
                      f"(raise the limit to {needed}, or lower max_open_ledger_files)")


def _capacity_from_limit() -> tuple[int, str | None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return AUTO_MAX_CAPACITY, None
    capacity = max(8, min(AUTO_MAX_CAPACITY, soft // 2))
    if capacity >= AUTO_LOW_CAPACITY:
        return capacity, None
    return capacity, (f"the open-file limit (ulimit -n) is {soft}: keeping at most {capacity} segment files "
                      f"open, so with more written topics they close and open again on every write "
                      f"(raise the limit to {2 * AUTO_LOW_CAPACITY} or more)")


class FileHandles:
    """The pool; one per storage backend."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY, close_dirty: bool = False) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        #: Whether a descriptor with unsynced writes may be closed (sync policy "never").
        self.close_dirty = close_dirty
        self._lock = threading.Lock()
        #: Open handles, least recently used first.
        self._open: OrderedDict[Handle, None] = OrderedDict()
        #: Files opened again after the pool had closed them (a measure of churn).
        self.reopens = 0

    def adopt(self, path: str, flags: int, fd: int) -> "Handle":
        """A handle for ``path`` already open as ``fd``; reopened with
        ``flags`` (no O_CREAT/O_EXCL/O_TRUNC) after the pool closed it."""
        handle = Handle(self, path, flags & ~(os.O_CREAT | os.O_EXCL | os.O_TRUNC))
        with self._lock:
            self._trim(room=1)
            handle._fd = fd
            self._open[handle] = None
        return handle

    def open(self, path: str, flags: int, mode: int = 0o644) -> "Handle":
        """Open ``path`` (room made first) and return its handle. OSError as os.open."""
        with self._lock:
            self._trim(room=1)
        fd = self._open_fd(path, flags, mode)
        return self.adopt(path, flags, fd)

    @property
    def open_count(self) -> int:
        return len(self._open)

    def _open_fd(self, path: str, flags: int, mode: int = 0o644) -> int:
        try:
            return os.open(path, flags, mode)
        except OSError as exc:
            if exc.errno not in _NO_DESCRIPTORS:
                raise
        with self._lock:  # out of descriptors: give back every one we can, once
            self._trim(room=len(self._open))
        return os.open(path, flags, mode)

    def acquire_all(self, handles: list["Handle"]) -> list[int | BaseException]:
        """:meth:`Handle.acquire` for many handles of this pool at once (a
        group commit's ledgers): per handle its descriptor, pinned, or the
        exception ``acquire`` would raise (then not pinned). The files the
        pool had closed are opened again, and the least recently used
        closed to make room, in one :func:`.round_io.reopen` call (one
        release of the GIL, not one per file). A file the system refuses
        for want of descriptors (EMFILE) goes through ``acquire``'s own
        retry."""
        out: list[int | BaseException] = [0] * len(handles)
        missing: list[int] = []
        with self._lock:
            for i, handle in enumerate(handles):
                if handle._closed:
                    out[i] = ValueError(f"{handle.path} is closed")
                    continue
                handle._pins += 1
                if handle._fd >= 0:
                    self._open.move_to_end(handle)
                    out[i] = handle._fd
                else:
                    missing.append(i)
            if not missing:
                return out
            closing = self._evict(len(missing))
        fds = round_io.reopen(closing, [handles[i].path for i in missing], [handles[i].flags for i in missing])
        retry: list[int] = []
        surplus: list[int] = []
        with self._lock:
            for i, fd in zip(missing, fds):
                handle = handles[i]
                if fd < 0:
                    handle._pins -= 1
                    if -fd in _NO_DESCRIPTORS:
                        retry.append(i)
                    else:
                        out[i] = OSError(-fd, os.strerror(-fd), handle.path)
                elif handle._fd >= 0:  # another thread opened it meanwhile
                    surplus.append(fd)
                    out[i] = handle._fd
                else:
                    handle._fd = fd
                    self._open[handle] = None
                    self.reopens += 1
                    out[i] = fd
        for fd in surplus:
            os.close(fd)
        for i in retry:
            try:
                out[i] = handles[i].acquire()
            except (OSError, ValueError) as exc:
                out[i] = exc
        return out

    def release_all(self, handles: list["Handle"]) -> None:
        """:meth:`Handle.release` for each of ``handles``, under one lock."""
        closing = []
        with self._lock:
            for handle in handles:
                handle._pins -= 1
                if handle._pins == 0 and handle._closed and handle._fd >= 0:
                    self._open.pop(handle, None)
                    closing.append(handle._fd)
                    handle._fd = -1
        for fd in closing:
            os.close(fd)

    def _trim(self, room: int = 0) -> None:
        """Close least recently used clean, unpinned descriptors until
        ``room`` more fit under the capacity. Caller holds the lock."""
        for fd in self._evict(room):
            os.close(fd)

    def _evict(self, room: int) -> list[int]:
        """Take least recently used unpinned descriptors out of the pool
        until ``room`` more fit under the capacity (a dirty one fsynced
        first unless ``close_dirty``); the descriptors, for the caller to
        close. Caller holds the lock."""
        excess = len(self._open) + room - self.capacity
        if excess <= 0:
            return []
        # The least recently used first, stopping as soon as enough are
        # found: with every file in use (more ledgers written than the pool
        # holds) this runs at each reopen, and a copy of the whole pool
        # each time was the writer thread's largest Python cost after its
        # writes (1,000 topics over 512 descriptors, py-spy).
        victims = []
        closing: list[int] = []
        for handle in self._open:
            if len(victims) >= excess:
                break
            if not handle._pins:
                victims.append(handle)
        for handle in victims:
            if handle._dirty and not self.close_dirty:
                # A group commit can write more ledgers than the pool holds
                # before it syncs them: sync this one now rather than keep
                # its descriptor. A failure is kept for the ledger's own next
                # sync (through a new descriptor it would not be reported).
                try:
                    os.fdatasync(handle._fd)
                    handle._dirty = False
                except OSError as exc:
                    handle._error = exc
            del self._open[handle]
            fd, handle._fd = handle._fd, -1
            closing.append(fd)
        return closing


class Handle:
    """One file of the pool. ``acquire()``/``release()`` around every use of
    the descriptor; ``written()`` after a write, ``synced(mark)`` after an
    fsync that began at ``mark = dirty_mark()``; ``close()`` once for good."""

    __slots__ = ("_pool", "path", "flags", "_fd", "_pins", "_dirty", "_writes", "_closed", "_error")

    def __init__(self, pool: FileHandles, path: str, flags: int) -> None:
        self._pool = pool
        self.path = path
        self.flags = flags
        self._fd = -1
        self._pins = 0
        self._dirty = False
        self._writes = 0
        self._closed = False
        #: An fsync that failed when the pool closed the descriptor (see _trim).
        self._error: OSError | None = None

    @property
    def pool(self) -> FileHandles:
        return self._pool

    def acquire(self) -> int:
        """An open descriptor, pinned until :meth:`release`. Raises
        ``ValueError`` once closed for good, ``OSError`` if the file cannot
        be opened again (gone, or no descriptor left)."""
        pool = self._pool
        with pool._lock:
            if self._closed:
                raise ValueError(f"{self.path} is closed")
            self._pins += 1
            if self._fd >= 0:
                pool._open.move_to_end(self)
                return self._fd
            pool._trim(room=1)
        try:
            fd = pool._open_fd(self.path, self.flags)
        except BaseException:
            with pool._lock:
                self._pins -= 1
            raise
        with pool._lock:
            if self._fd >= 0:  # another thread opened it meanwhile
                os.close(fd)
            else:
                self._fd = fd
                pool._open[self] = None
                pool.reopens += 1
            return self._fd

    def release(self) -> None:
        pool = self._pool
        with pool._lock:
            self._pins -= 1
            if self._pins == 0 and self._closed and self._fd >= 0:
                pool._open.pop(self, None)
                fd, self._fd = self._fd, -1
                os.close(fd)

    def written(self) -> None:
        """Bytes went through the descriptor (pinned): keep it open until synced."""
        self._dirty = True
        self._writes += 1

    def dirty_mark(self) -> int:
        """Taken before an fsync: what :meth:`synced` may call clean."""
        return self._writes

    def synced(self, mark: int) -> None:
        """An fsync that began at ``mark`` succeeded: clean unless written
        since. Raises the OSError of an fsync the pool made when it closed
        the descriptor, if that failed: the caller's fsync did not cover it."""
        with self._pool._lock:
            error, self._error = self._error, None
            if error is not None:
                raise error
            if self._writes == mark:
                self._dirty = False

    def close(self) -> None:
        """Close for good, once no use is in flight. Idempotent."""
        pool = self._pool
        with pool._lock:
            if self._closed:
                return
            self._closed = True
            if self._pins or self._fd < 0:
                return
            pool._open.pop(self, None)
            fd, self._fd = self._fd, -1
        os.close(fd)

    @property
    def closed(self) -> bool:
        return self._closed
