"""Large writes made durable in their segment file, not copied into the journal.

With the journal, a round's bytes are written twice: to each ledger's
segment file (page cache, synced later by the checkpoint) and to the
journal (synced now). For a round of many small ledgers that is the point:
one fdatasync whatever their number. For a ledger that got megabytes in the
round (a Spark task's batch write) it doubles the bytes: on a virtual
machine whose balloon reports free pages to the host, each page-cache page
written the first time costs a host fault, and the journal's pages (trimmed
every checkpoint, so always fresh) were half the broker's CPU of a write.

So, under sync policy ``always``, :func:`choose_direct` picks the ledgers of
a round that wrote at least ``min_bytes`` (the largest first, at most
``most`` of them, so a round's fdatasyncs stay bounded whatever the number
of topics: at most ``most`` + 1), and :class:`DirectSyncs` fdatasyncs their
segment files, on threads, while the journal's own sync runs; only the
others get journal records. A receipt still means
the entry is on disk: the segment's fdatasync covers the whole file (every
earlier entry of the ledger too), and the round completes after it.

Replay and checkpoint need nothing new: replay appends, per journal record,
the entries a segment lacks, and a directly synced round's entries are in
the segment file before any later record of that ledger is written; the
checkpoint syncs only the ledgers it was told of.

Failures: a segment fdatasync that fails (EIO) fails that ledger's batches
of the round (the writer rolls the ledger back and fences it, as for a
failed journal sync); the round's other ledgers are not touched.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import StorageError
from .durability import Written
from .ledger import Ledger

#: A ledger's bytes in one round from which its segment file is synced
#: instead of journaled (0: never), for callers that build a JournalSync
#: themselves; the broker passes ``[storage] journal_direct_bytes``.
DEFAULT_MIN_BYTES = 1 << 20
#: Segment fdatasyncs a round makes at most besides the journal's.
DEFAULT_MOST = 4


def choose_direct_indexes(sizes: list[int], min_bytes: int = DEFAULT_MIN_BYTES,
                          most: int = DEFAULT_MOST) -> list[int]:
    """Of a round's ledgers, given the bytes each got: the indexes of those
    with at least ``min_bytes``, the largest ``most`` of them, in order.
    The writer asks before its writes (those go ``O_DIRECT``,
    :mod:`.direct_io`) and :func:`choose_direct` after them; with a
    failed write left out the choice after is the same (removing a ledger
    never pushes another out of the largest ``most``), and a ledger written
    direct but journaled would still be durable (the journal holds its bytes)."""
    if min_bytes <= 0 or most <= 0:
        return []
    large = [i for i, n in enumerate(sizes) if n >= min_bytes]
    if len(large) > most:
        large = sorted(sorted(large, key=sizes.__getitem__, reverse=True)[:most])
    return large


def choose_direct(written: list[Written], min_bytes: int = DEFAULT_MIN_BYTES,
                  most: int = DEFAULT_MOST) -> tuple[list[Written], list[Written]]:
    """Split a round's ``written`` into (synced in place, journaled): the
    ledgers with at least ``min_bytes``, the largest ``most`` of them, go
    first; the order within each part is the round's."""
    large = choose_direct_indexes([len(w[2]) for w in written], min_bytes, most)
    if not large:
        return [], written
    chosen = set(large)
    return [written[i] for i in large], [w for i, w in enumerate(written) if i not in chosen]


def _sync(ledger: Ledger) -> BaseException | None:
    try:
        ledger.sync()
    except Exception as exc:  # StorageError (EIO, closed): this ledger's batches fail
        return exc if isinstance(exc, StorageError) else StorageError(
            f"fsync of ledger {ledger.ledger_id} failed: {exc!r}")
    return None


class DirectSyncs:
    """fdatasyncs of a round's chosen segment files, started together on
    threads of their own (``most`` at most) while the writer does the
    journal's: concurrent fsyncs on one filesystem share its commit (ext4's
    jbd2 joins them into one transaction), where one after the other each
    waits for its own."""

    def __init__(self, most: int = DEFAULT_MOST) -> None:
        self._pool = ThreadPoolExecutor(max(1, most), thread_name_prefix="magnetar-direct-sync")

    def start(self, direct: list[Written]) -> list[tuple[Ledger, Future]]:
        """Begin syncing each ledger's segment file; :meth:`wait` for them."""
        return [(w[0], self._pool.submit(_sync, w[0])) for w in direct]

    @staticmethod
    def wait(started: list[tuple[Ledger, Future]]) -> dict[Ledger, BaseException]:
        """Once every started sync returned: the ledgers whose sync failed."""
        failed: dict[Ledger, BaseException] = {}
        for ledger, future in started:
            error = future.result()
            if error is not None:
                failed[ledger] = error
        return failed

    def close(self) -> None:
        self._pool.shutdown(wait=True)
