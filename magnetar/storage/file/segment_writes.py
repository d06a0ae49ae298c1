"""A group commit's segment writes, all ledgers in one call.

:func:`write_segments` takes the round's prepared records
(``Ledger.prepare_write``), pins every ledger's descriptor at once
(``FileHandles.acquire_all``: the files the pool had closed opened again
in one call), writes them all with one :func:`.round_io.write_all` (one
release of the GIL for the round, compiled), then marks each ledger's
entries written or its write failed.

The ledgers the durability will fdatasync in place (``direct``, chosen by
:func:`.direct_sync.choose_direct_indexes`) are written by a
:class:`.direct_io.DirectWriter` when one is given (``O_DIRECT``: no new
page-cache pages for their bytes), after the round's others, at once on
threads.

Per ledger the outcome is what ``Ledger.write_entries`` gives: a file that
cannot be opened changes nothing (``StorageError``, not fenced); a failed
write cuts the file back and fences the ledger (``StorageError``); the
other ledgers of the round are not touched by one's failure.
"""
from __future__ import annotations

import os

from ..errors import StorageError
from . import round_io
from .direct_io import DirectWriter
from .handles import FileHandles
from .ledger import Ledger, PreparedWrite

#: Per ledger of a round: the ledger, its entry count before, its records, their count.
Prepared = tuple[Ledger, int, PreparedWrite, int]


def write_segments(prepared: list[Prepared], direct: frozenset[int] = frozenset(),
                   writer: DirectWriter | None = None) -> list[BaseException | None]:
    """Write each ledger's prepared records to its segment file (not
    synced); per ledger None or the error its batches fail with. The
    indexes in ``direct`` go through ``writer`` (if given). A round
    that wrote more ledgers than their pool holds goes in parts of at most
    the pool's capacity, so the pool stays within it."""
    errors: list[BaseException | None] = [None] * len(prepared)
    by_pool: dict[FileHandles, list[int]] = {}
    for i, item in enumerate(prepared):
        by_pool.setdefault(item[0].handle.pool, []).append(i)
    for pool, indexes in by_pool.items():
        step = max(1, pool.capacity)
        for at in range(0, len(indexes), step):
            _write_part(pool, prepared, indexes[at:at + step], errors, direct if writer else (), writer)
    return errors


def _write_part(pool: FileHandles, prepared: list[Prepared], indexes: list[int],
                errors: list[BaseException | None], direct=(), writer: DirectWriter | None = None) -> None:
    handles = [prepared[i][0].handle for i in indexes]
    held = []
    writing: list[int] = []
    fds: list[int] = []
    bufs: list[bytes] = []
    large: list[tuple[int, int]] = []
    for i, handle, fd in zip(indexes, handles, pool.acquire_all(handles)):
        if isinstance(fd, BaseException):
            errors[i] = _cannot_open(prepared[i][0], fd)
            continue
        handle.written()  # before any byte: the pool keeps a dirty descriptor until synced
        held.append(handle)
        if i in direct:
            large.append((i, fd))
            continue
        writing.append(i)
        fds.append(fd)
        bufs.append(prepared[i][2].buf)
    try:
        for i, err in zip(writing, round_io.write_all(fds, bufs)):
            ledger, _, write, _ = prepared[i]
            if err:
                errors[i] = ledger.write_failed(OSError(err, os.strerror(err)))
            else:
                ledger.write_done(write)
        if large:
            outcomes = writer.write_many([(prepared[i][0].handle.path, fd, prepared[i][0].size, prepared[i][2].buf)
                                          for i, fd in large])
            for (i, _), exc in zip(large, outcomes):
                ledger, _, write, _ = prepared[i]
                if exc is not None:
                    errors[i] = ledger.write_failed(exc)
                else:
                    ledger.write_done(write)
    finally:
        pool.release_all(held)


def _cannot_open(ledger: Ledger, exc: BaseException) -> StorageError:
    # As Ledger._use: nothing was written, the ledger is not fenced.
    if isinstance(exc, ValueError):
        return StorageError(f"ledger {ledger.ledger_id} is closed")
    return StorageError(f"cannot open ledger {ledger.ledger_id}'s file: {exc}")
