"""Storage: ledgers in segment files, group commit, managed ledgers, cursors.

Stores opaque entry bytes; knows nothing of topics, producers or the Pulsar
protocol. Start with :class:`ManagedLedgerFactory`.
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
from .group_commit import GroupCommitWriter
from .ledger import Ledger, LedgerState
from .entry import Entry, LedgerInfo
from .factory import ManagedLedgerFactory
from .managed_ledger import ManagedLedger
from .position import Position
from .object_index import ROOT as _OBJECT_INDEX_ROOT

#: Metadata roots storage writes at a high rate and only reads by key (object
#: storage's index: a record per section committed): open the metadata store
#: with ``unwatched=UNWATCHED_ROOTS`` so its watch stream leaves them out.
UNWATCHED_ROOTS = (_OBJECT_INDEX_ROOT,)

__all__ = [
    "CorruptLedgerError",
    "CursorFencedError",
    "Entry",
    "GroupCommitWriter",
    "Ledger",
    "LedgerFencedError",
    "LedgerInfo",
    "LedgerState",
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
