"""The ``disk-full`` fault: the broker's data directory on a small tmpfs that
the nemesis fills to the last byte for a while, then frees.

Writes then fail with ENOSPC in the ledger files and the metadata database
alike: sends in flight fail (the client resends or reports them), nothing
acknowledged may be lost, and the broker must serve again once there is room.
Mounting a tmpfs needs root (CAP_SYS_ADMIN); without it the fault is refused
at the start of the run with a clear error. Only this run's own mount point
is touched.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


class DiskFullUnavailable(RuntimeError):
    pass


class SmallDisk:
    """A tmpfs of ``size_mb`` at ``path`` (mounted by :meth:`mount`)."""

    def __init__(self, path: Path, size_mb: int = 512) -> None:
        self.path = Path(path)
        self.size_mb = size_mb
        self.mounted = False
        self.ballast = self.path / ".chaos-ballast"

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.path)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise DiskFullUnavailable(
                f"the disk-full fault mounts a tmpfs, which needs root: {result.stderr.strip() or result.returncode}")
        self.mounted = True

    def fill(self) -> int:
        """Take every free byte; returns how many were taken."""
        written = 0
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for size in (1 << 20, 4096, 1):  # big pieces, then the crumbs
                piece = b"\0" * size
                try:
                    while True:
                        written += os.write(fd, piece)
                except OSError:  # ENOSPC: full at this granularity
                    pass
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        try:
            self.ballast.unlink()
        except FileNotFoundError:
            pass

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
            self.mounted = False
