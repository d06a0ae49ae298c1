"""Room for the journal's records: zero-filled ahead of them, off the writer's thread.

An fdatasync of bytes written past a file's end changes its size and
allocates blocks, so on ext4 it waits for a filesystem transaction, which
also carries whatever else the filesystem allocated meanwhile (segment files
written back by the checkpoint, other programs' files). Bytes written over
blocks that are already written and synced need no transaction: the sync
waits for that data and a cache flush only. So the journal's file is
zero-filled and synced ahead of its records (BookKeeper preallocates its
journal the same way), here by :class:`Preallocator`'s thread:

- when fewer than half a ``chunk`` of zero-filled room is left past the
  records, the next ``chunk`` of zeros is written and fdatasynced;
- near a file's end (``file_bytes``), the next file is made ready (created
  with its head, its first chunk zero-filled and synced, the directory
  synced), so starting it costs the writer nothing.

Safety: zeros never go where a record is or may be: the writer reserves the
end of each record (:meth:`Preallocator.reserve`) before writing it, a fill
starts at or past every reservation, and a record reaching into a fill under
way waits for it. The room changes no byte a reader uses: zeros after the
last record read as the end (a record of length 0 is never written).

Failures: a fill or a spare file whose write or sync fails (EIO) is given up
for that file (one warning line); the journal then extends the file itself,
as without preallocation, and its own fdatasync reports a failing disk.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable

log = logging.getLogger(__name__)

_ZEROS = bytes(1 << 20)


def write_zeros(fd: int, start: int, length: int) -> None:
    """Write ``length`` zero bytes at ``start`` (pwrite, 1 MiB at a time)."""
    end = start + length
    while start < end:
        start += os.pwrite(fd, memoryview(_ZEROS)[:min(len(_ZEROS), end - start)], start)


class Preallocator:
    """See the module docstring. ``create(seq)`` makes journal file ``seq``
    (its head written, the directory synced) and returns its descriptor,
    ``discard(seq)`` removes it; ``head`` is the head's size. Counters:
    ``fills``, ``spares``."""

    def __init__(self, create: Callable[[int], int], discard: Callable[[int], None], head: int, chunk: int,
                 file_bytes: int, name: str = "magnetar-journal-room") -> None:
        self._create = create
        self._discard = discard
        self._head = head
        self.chunk = chunk
        self.file_bytes = file_bytes
        self._cond = threading.Condition(threading.Lock())
        self._seq = 0            # the journal's current file
        self._fd = -1            # this thread's duplicate of its descriptor
        self._zeroed = 0         # end of its zero-filled, synced room
        self._reserved = 0       # end of the records written or being written
        self._filling_from: int | None = None  # start of the fill under way
        self._given_up = 0       # a file whose fill failed: no more fills in it
        self._spare: tuple[int, int, int] | None = None  # (seq, fd, zeroed) of the next file
        self._preparing = 0      # the seq of a spare being made (0: none)
        self._spare_failed = 0   # a seq whose spare failed: not tried again
        self._stop = False
        self.fills = 0
        self.spares = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ writer side

    def take_spare(self, seq: int) -> tuple[int, int] | None:
        """The ready file ``seq`` as ``(fd, zeroed)``, or None (create it).
        Waits while it is being made."""
        with self._cond:
            while self._preparing == seq:
                self._cond.wait()
            spare = self._spare
            if spare is None or spare[0] != seq:
                return None
            self._spare = None
            return spare[1], spare[2]

    def opened(self, seq: int, fd: int, zeroed: int) -> None:
        """The journal writes file ``seq`` (descriptor ``fd``, zero-filled up
        to ``zeroed``) from now on."""
        mine = os.dup(fd)
        with self._cond:
            old, self._fd = self._fd, mine
            self._seq, self._zeroed, self._reserved = seq, max(zeroed, self._head), self._head
            self._cond.notify_all()
        if old >= 0:
            os.close(old)

    def reserve(self, seq: int, end: int) -> None:
        """Before the journal writes a record ending at ``end`` of file
        ``seq``: waits if a fill under way covers it; wakes the thread when
        the room runs low."""
        with self._cond:
            while self._filling_from is not None and self._seq == seq and end > self._filling_from:
                self._cond.wait()
            self._reserved = end
            if self._wanted():
                self._cond.notify_all()

    # ------------------------------------------------------------ the thread

    def _fill_wanted(self) -> bool:
        return (self._filling_from is None and self._fd >= 0 and self._given_up != self._seq
                and self._zeroed - self._reserved < self.chunk // 2 and self._zeroed < self.file_bytes)

    def _spare_wanted(self) -> bool:
        nxt = self._seq + 1
        return (self._seq > 0 and self._spare is None and not self._preparing and self._spare_failed != nxt
                and self._reserved >= self.file_bytes - 2 * self.chunk)

    def _wanted(self) -> bool:
        return self._fill_wanted() or self._spare_wanted()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not self._wanted():
                    self._cond.wait()
                if self._stop:
                    return
                if self._fill_wanted():
                    seq, start = self._seq, max(self._zeroed, self._reserved)
                    fd = os.dup(self._fd)
                    self._filling_from = start
                    job = "fill"
                else:
                    seq = self._seq + 1
                    self._preparing = seq
                    job = "spare"
            if job == "fill":
                self._fill(seq, fd, start)
            else:
                self._make_spare(seq)

    def _fill(self, seq: int, fd: int, start: int) -> None:
        ok = False
        try:
            write_zeros(fd, start, self.chunk)
            os.fdatasync(fd)
            ok = True
        except OSError as exc:
            log.warning("journal: zero-filling file %d ahead of its records failed (%s); it grows as it is "
                        "written", seq, exc)
        finally:
            os.close(fd)
        with self._cond:
            self._filling_from = None
            if self._seq == seq:
                if ok:
                    self._zeroed = start + self.chunk
                    self.fills += 1
                else:
                    self._given_up = seq
            self._cond.notify_all()

    def _make_spare(self, seq: int) -> None:
        spare = None
        try:
            fd = self._create(seq)
            try:
                write_zeros(fd, self._head, self.chunk)
                os.fdatasync(fd)
                spare = (seq, fd, self._head + self.chunk)
            except OSError:
                os.close(fd)
                raise
        except OSError as exc:
            # A file that exists with its head and no record is a valid
            # empty one: the journal's own create would find it (O_EXCL)
            # and fail, so it goes.
            log.warning("journal: making file %d ready ahead failed (%s); it is made when needed", seq, exc)
            self._discard(seq)
        with self._cond:
            self._preparing = 0
            if spare is not None:
                self._spare = spare
                self.spares += 1
            else:
                self._spare_failed = seq
            self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread; close its descriptors and the spare's (the
        spare file stays, an empty journal file, until the journal goes)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join()
        with self._cond:
            fds = [self._fd] + ([self._spare[1]] if self._spare else [])
            self._fd, self._spare = -1, None
        for fd in fds:
            if fd >= 0:
                os.close(fd)
