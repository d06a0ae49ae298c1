"""Errors raised by the storage layer.

Everything derives from :class:`StorageError`, so the broker can map any
storage failure to a persistence error for the client with one ``except``.
"""
from __future__ import annotations


class StorageError(Exception):
    """A storage operation failed; the data it concerned is not durable."""


class LedgerFencedError(StorageError):
    """The ledger no longer accepts writes (sealed, fenced or failed)."""


class CorruptLedgerError(StorageError):
    """A segment file or its index does not hold what its metadata promises."""


class ManagedLedgerClosedError(StorageError):
    """The managed ledger (or cursor) was closed or deleted."""


class ManagedLedgerFencedError(StorageError):
    """Someone else changed this managed ledger's metadata: we lost ownership.

    The instance refuses further writes; close it. Opening it again reads the
    new owner's state.
    """


class ManagedLedgerFailedError(StorageError):
    """A write failed and the managed ledger could not roll to a new ledger.

    Every append fails until the managed ledger is closed and opened again.
    """


class ManagedLedgerNotFoundError(StorageError):
    """No managed ledger of that name exists."""


class CursorFencedError(StorageError):
    """The cursor's metadata was changed by someone else (or deleted)."""
