"""``syncfs(2)``: write back and sync every dirty file of one filesystem in one call.

The journal's checkpoint uses it when many segment files are dirty: one call
(one writeback pass, one filesystem journal commit) instead of one
fdatasync per file, each forcing a commit of its own that the journal's own
fdatasync then queues behind. It also writes other processes' dirty pages on
that filesystem: fine off the append path.

Errors: since Linux 5.8 ``syncfs`` reports a writeback error of any file of
the filesystem that happened since the descriptor it is given was opened
(and each only once). :func:`available` is False on older kernels (where it
always returned 0) and where libc lacks it; callers then sync file by file.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

_libc = None


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def available() -> bool:
    """Whether :func:`syncfs` syncs and reports writeback errors here (Linux >= 5.8)."""
    global _libc
    if platform.system() != "Linux" or not _kernel_at_least(5, 8):
        return False
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            _libc.syncfs  # noqa: B018 (raises AttributeError if libc lacks it)
        except (OSError, AttributeError):
            _libc = False
    return bool(_libc)


def syncfs(fd: int) -> None:
    """Sync the filesystem holding ``fd``; raises ``OSError`` (EIO: a file
    of it failed writeback since ``fd`` was opened or last reported)."""
    if _libc.syncfs(fd) != 0:  # the GIL is released during the call (ctypes)
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
