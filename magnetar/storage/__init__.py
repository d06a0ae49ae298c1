"""Storage: managed ledgers and their cursors over a ledger backend.

Stores opaque entry bytes; knows nothing of topics, producers or the Pulsar
protocol. Start with :class:`ManagedLedgerFactory`. The bytes go through the
seam :class:`LedgerBackend` (:mod:`.backend`; records framed as
:mod:`.framing` says) to a backend package: :mod:`.file` (segment files, the
default) or :mod:`.object` (an object store).
"""
from .config import RetentionPolicy, StorageConfig
from .cursor import ManagedCursor
from .errors import (
    CorruptLedgerError,
    CursorFencedError,
    LedgerFencedError,
    ManagedLedgerClosedError,
    ManagedLedgerFailedError,
    ManagedLedgerFencedError,
    ManagedLedgerNotFoundError,
    StorageError,
)
from .backend import BackendStats, LedgerBackend, LedgerHandle
from .entry import Entry, LedgerInfo
from .factory import ManagedLedgerFactory
from .managed_ledger import ManagedLedger
from .position import Position
from .object.index import ROOT as _OBJECT_INDEX_ROOT
from .object.commit_records import COMMITS as _OBJECT_COMMITS_ROOT

#: Metadata roots storage writes at a high rate and only reads by key (object
#: storage's index: a record per section committed): open the metadata store
#: with ``unwatched=UNWATCHED_ROOTS`` so its watch stream leaves them out.
UNWATCHED_ROOTS = (_OBJECT_INDEX_ROOT, _OBJECT_COMMITS_ROOT)

__all__ = [
    "BackendStats",
    "CorruptLedgerError",
    "CursorFencedError",
    "Entry",
    "LedgerBackend",
    "LedgerFencedError",
    "LedgerHandle",
    "LedgerInfo",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerClosedError",
    "ManagedLedgerFactory",
    "ManagedLedgerFailedError",
    "ManagedLedgerFencedError",
    "ManagedLedgerNotFoundError",
    "Position",
    "RetentionPolicy",
    "StorageConfig",
    "StorageError",
    "UNWATCHED_ROOTS",
]
