"""The storage seam: where the bytes of a managed ledger's entries go.

A managed ledger (a topic's log) is a sequence of ledgers; it keeps their
list, the positions, the cursors and the tail cache, and never touches the
bytes of an entry itself. Everything it does with bytes goes through one
:class:`LedgerBackend`: write a batch of entries to the open ledger, seal it,
read a range back, fence a previous owner's ledger, recover it, delete it.

Implementations, one package each, reached only through this Protocol:

- :mod:`.file` (``--storage file``, the default): segment files under
  ``<data dir>/ledgers``, one group-commit writer thread, fence markers
  beside the files.
- :mod:`.object` (``--storage object``): entries in shared objects, the
  commit and the fence in the metadata store.

A new backend is a package beside them implementing this Protocol, plus one
branch in :func:`.factory.open_factory` (or handed to
``ManagedLedgerFactory(..., backend=...)``); nothing above storage changes.

Contract every implementation keeps:

- ``submit`` never blocks on I/O; a ledger's batches complete in submission
  order, on the loop given, with ``None`` once durable under the backend's
  policy, ``ManagedLedgerFencedError`` once another owner fenced the ledger
  (nothing of that batch may be acknowledged), or another ``StorageError``
  (the ledger refuses later batches; the managed ledger rolls to a new one).
- ``fence(ledger_id)`` returns once the ledger's previous writer can no
  longer complete a batch with ``None``; ``recover`` then sees every entry
  such a writer ever completed with ``None``.
- Entry ids are 0, 1, 2... per ledger; a ledger's ``size`` counts
  ``HEADER_SIZE`` bytes of framing per entry (:mod:`.framing`), whatever
  the backend stores.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence

#: What one ``read`` returns at most (unless a single entry is larger).
READ_CHUNK_BYTES = 8 * 1024 * 1024

#: ``callback(error)``: None when durable, else the StorageError (see above).
WriteCallback = Callable[["BaseException | None"], None]


class LatencyHistogram(Protocol):
    """Cumulative latency buckets, as Prometheus exposes them."""

    sum: float

    def cumulative(self) -> list[tuple[str, int]]:
        """``(upper bound in seconds, observations at or below it)``, ``+Inf`` last."""
        ...


@dataclass(frozen=True)
class BackendStats:
    """What a backend counted since it started (for ``/metrics``, benchmarks
    and tests). ``kind`` names the backend (``"file"``, ``"object"``);
    ``counters`` are running totals by name, ``histograms`` latencies by
    name (seconds). Each backend documents its names; a reader skips names
    it does not know."""

    kind: str
    counters: Mapping[str, int] = field(default_factory=dict)
    histograms: Mapping[str, LatencyHistogram] = field(default_factory=dict)


class LedgerHandle(Protocol):
    """One ledger as its backend hands it out (written, or opened to read)."""

    ledger_id: int

    @property
    def entry_count(self) -> int: ...

    @property
    def size(self) -> int:
        """Bytes of the entries written, ``HEADER_SIZE`` framing each included."""
        ...

    @property
    def full(self) -> bool:
        """The backend asks for a rollover (checked after each completed batch)."""
        ...

    @property
    def nearly_full(self) -> bool:
        """A rollover is near (``full`` soon): the managed ledger prepares
        the next ledger ahead, so the rollover can switch appends to it at
        once (checked after each completed batch)."""
        ...

    def fence(self) -> None:
        """Refuse further writes from this process (idempotent, no I/O)."""
        ...

    def close(self) -> None:
        """Release what the handle holds (files, buffers); idempotent."""
        ...


@dataclass
class CreateBeside:
    """A ledger's creation as metadata writes for the managed ledger's
    record transaction (:meth:`LedgerBackend.create_beside`): ``compares``
    and ``writes`` go into it after the record's own; ``finish`` takes
    the new versions of ``writes`` once it succeeded and returns the handle."""

    compares: list
    writes: list
    finish: Callable[[list], LedgerHandle]


class LedgerBackend(Protocol):
    """Writes, reads, fences and deletes the bytes of ledgers."""

    async def create(self, ledger_id: int) -> LedgerHandle:
        """A new, empty, writable ledger. Ids never repeat."""
        ...

    async def create_beside(self, ledger_id: int) -> CreateBeside | None:
        """The new ledger ``ledger_id`` as writes to the metadata store, for
        the caller to apply in one transaction with its own (a rollover's
        record naming the ledger prepared: one etcd transaction instead of
        two); None when the backend keeps no record of its own there (then
        :meth:`create`). Raises ``StorageError``."""
        ...

    def submit(self, ledger: LedgerHandle, datas: Sequence[bytes], callback: WriteCallback,
               loop: asyncio.AbstractEventLoop) -> None:
        """Queue ``datas`` (a list, or the append path's tuple: never changed
        by the backend) as the ledger's next entries (hot path: no I/O).
        Raises ``StorageError`` at once if the backend is stopped."""
        ...

    def submit_many(self, writes: list[tuple], loop: asyncio.AbstractEventLoop) -> None:
        """``submit`` for each ``(handle, datas, nbytes, callback)`` of
        ``writes`` (several ledgers, at most one batch each; ``nbytes``: the
        batch's bytes framed), in one call: the managed ledgers' hand-over of
        one loop pass (:mod:`.flush_pass`). Same contract per batch; raises
        ``StorageError`` at once, having queued nothing, if the backend is stopped."""
        ...

    async def seal(self, ledger: LedgerHandle) -> tuple[int, int]:
        """Make the ledger's written entries final after every batch
        submitted before; return ``(entries, size)``. Raises ``StorageError``."""
        ...

    async def fence(self, ledger_id: int) -> None:
        """Take the ledger from whoever writes it (a previous owner)."""
        ...

    async def recover(self, ledger_id: int) -> LedgerHandle | None:
        """Open a ledger that may not have been sealed, after :meth:`fence`;
        seal it at its last intact entry (one with no entry may be left
        unsealed: the caller drops it). None if nothing was ever stored."""
        ...

    async def open_sealed(self, ledger_id: int, entries: int) -> LedgerHandle:
        """Open a sealed ledger of ``entries`` entries for reading. Raises
        ``StorageError`` (``CorruptLedgerError`` if entries are missing)."""
        ...

    async def read(self, ledger: LedgerHandle, first: int, last: int, max_bytes: int | None) -> list[bytes]:
        """Entries ``first..`` (at most ``last``), stopping early past
        ``max_bytes`` or the backend's read chunk (at least one entry).
        Raises ``StorageError`` (``CorruptLedgerError`` on a bad checksum)."""
        ...

    async def taken_over(self, ledger_id: int) -> bool:
        """Whether another owner fenced the ledger (checked at close)."""
        ...

    async def delete(self, ledger_id: int, ledger: LedgerHandle | None = None, *, fenced: bool = False) -> None:
        """Delete the ledger's bytes (missing ones are fine). With ``fenced``
        (a ledger this backend fenced, which recovery then found empty),
        what fences it stays: a previous owner paused with the ledger open
        must still get no receipt for a write into it."""
        ...

    async def stored_ledger_ids(self) -> set[int]:
        """Ids of the ledgers this backend stores (for orphans)."""
        ...

    def set_profile(self, ledger: LedgerHandle, profile: str | None) -> None:
        """The storage profile of the ledger's later batches: ``"latency"``
        (durable as soon as the backend can), ``"cost"`` (the backend may
        hold them to gather more), None (the backend's default). A backend
        that writes every batch at once ignores it. No I/O."""
        ...

    def stats(self) -> BackendStats:
        """What the backend counted so far (no I/O; cheap enough per scrape)."""
        ...

    async def close(self) -> None:
        """Finish everything submitted, then stop."""
        ...

    def abandon(self) -> None:
        """Stop at once without finishing queued work, as a crash would."""
        ...
