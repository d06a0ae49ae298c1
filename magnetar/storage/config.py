"""Storage configuration, validated on construction."""
from __future__ import annotations

import math
from dataclasses import dataclass

from magnetar.objectstore.store import ObjectStoreConfigError
from magnetar.objectstore.url import parse_url

SYNC_POLICIES = ("always", "interval", "never")
#: Where ledgers live: segment files on a (shared) disk, or objects in an
#: S3-compatible store with their index in the metadata store.
BACKENDS = ("file", "object")
STORAGE_PROFILES = ("latency", "cost")  # storage/object/profiles.py
#: S3's largest single PUT (5 GiB): one commit is one PUT.
MAX_OBJECT_BYTES = 5 * 1024**3
#: Bounds of ``object_sections_per_ledger``: below 10 a ledger rolls over
#: every few commits; above 100,000 an open ledger's index (in memory, and
#: in etcd until its compaction) grows past what a rollover bounded it to.
MIN_SECTIONS_PER_LEDGER = 10
MAX_SECTIONS_PER_LEDGER = 100_000


@dataclass
class StorageConfig:
    """Knobs of the storage layer. Invalid values raise ``ValueError``.

    sync_policy:
        ``"always"``: an append completes only after its bytes are written and
        fdatasync'ed (with ``journal``: in the journal; the segment file later).
        Group commit: every append that arrives while an fsync runs is
        written and synced together in the next round, so one fsync covers
        many appends.
        ``"interval"``: an append completes after write(); the writer fsyncs
        (the journal, or each segment file written) every
        ``sync_interval_ms``. Survives a process crash, not a power loss of
        the last interval.
        ``"never"``: an append completes after write(); flushing is left to
        the OS. Ledgers are still fsynced when sealed.
    sync_interval_ms: fsync period for ``"interval"``.
    journal: segment files (``backend = "file"``) write every entry to one
        journal per broker first and sync that, once per group commit
        whatever the number of topics written; the segment files are synced
        by a background checkpoint and restored from the journal after a
        crash (``storage/file/journal*.py``). False: each segment file
        written is fdatasync'ed per group commit (the cost grows with the
        topics written). Policy ``"never"`` writes no journal.
    journal_checkpoint_interval_ms: how often the checkpoint syncs the
        segment files written since the last one (each once, off the append
        path: with 10,000 written topics about 1,000 fsyncs/s at 10 s) and
        trims the journal; what a restart after a crash replays at most.
    journal_file_bytes: a new journal file past this size (trimmed whole).
    journal_direct_bytes: under sync policy ``"always"``, a ledger that got
        at least this many bytes in one group commit has its segment file
        fdatasynced instead of a journal record (its bytes written once;
        at most 4 such per group commit; ``storage/file/direct_sync.py``).
        0: every write goes through the journal.
    segment_direct_io: those large writes go to the segment file with
        ``O_DIRECT`` (no new page-cache pages; ``storage/file/direct_io.py``)
        where the filesystem takes it (not on tmpfs, said at start-up).
    max_entries_per_ledger, max_ledger_bytes, max_ledger_age_s: roll over to a
        new ledger when the current one reaches any of these (bytes count the
        8-byte frame header of each entry; age is checked by a timer).
    retention_time_s, retention_size_bytes: a fully consumed closed ledger is
        deleted only when it was closed more than ``retention_time_s`` ago and
        the managed ledger's size (counting it) exceeds
        ``retention_size_bytes``. Both 0: consumed ledgers go at once.
    cursor_persist_interval_ms: minimum time between two metadata writes of
        one cursor. Acks in between wait and share the next write. 0: write as
        soon as the previous write finished (acks still coalesce while it runs).
    read_cache_bytes: size of each managed ledger's tail cache (the most
        recently appended entries, served to readers without disk reads; it
        may go an eighth over before it evicts, in one go, down to this).
        0 disables it.
    cache_budget_bytes: what all the managed ledgers' tail caches hold
        together (an eighth over at most): past it, the caches written to
        least recently give up their entries first. 0: no shared limit.
    backend: ``"file"`` (segment files under the storage directory; the
        default, and standalone's only backend) or ``"object"`` (ledgers in
        the object store at ``object_store_url``, their index in the
        cluster's metadata store: docs/object-storage.md).
    object_store_url: ``s3://BUCKET/PREFIX?endpoint=...&region=...``
        (:mod:`magnetar.objectstore.url`); required by ``"object"``.
    object_storage_profile: how a broker commits the entries of a topic
        whose namespace sets no ``storage_profile`` policy: ``"latency"``
        (a commit begins as soon as there is room in the pipeline and a
        PUT in the budget) or ``"cost"`` (entries wait up to
        ``object_commit_interval_ms`` to be gathered with others).
    object_commit_interval_ms, object_commit_max_bytes: how long an entry
        of the ``cost`` profile waits at most (250 ms: at most 4 PUTs a
        second per broker while only such topics are written), and how many
        bytes one commit object gathers at most (one PUT and one metadata
        transaction; receipts go out after the commit).
    object_put_budget_per_s: commit objects a broker writes per second at
        most, whatever the load (a token bucket; 0: no budget): it bounds
        the PUT bill of ``latency`` topics; under load commits grow instead
        (docs/object-storage.md has the monthly cost).
    object_put_budget_floor_per_s: the least that budget goes down to
        while the broker's loop waits for a core a fifth of the time or
        more: it then searches for the commit rate where commits answer
        fastest (fewer, bigger commits give back the CPU each commit costs
        the store, etcd and the broker, but make batches wait longer for
        theirs), and goes back up as the wait ends. 25 by default (a batch
        then waits 20 ms on average for the next commit); at or above the
        budget: the rate never moves. Linux only (the wait is read in
        /proc); elsewhere the budget stays as configured.
    object_layout: the index layout format of the object ledgers a broker
        creates: 2 (a fence per writer and one metadata record per commit:
        a commit's metadata costs etcd about the same whatever the number
        of topics it carries) or 1 (a compare and a record per ledger per
        commit, what brokers before format 2 read). Existing ledgers keep
        theirs. The first format-2 ledger raises the data set's
        ``object_layout`` to 2: older brokers refuse it from then on. 3 (the
        default): format 2, and a sealed ledger of small sections compacted
        from the store gets an index object instead of chunks (no data
        moved; docs/object-storage.md); the first such ledger raises
        ``object_layout`` to 3.
    object_sections_per_ledger: an object ledger asks to be rolled over
        once it holds this many sections (one per commit that carried its
        entries; it bounds an open ledger's index in memory and in the
        metadata store). An integer from 10 to 100,000; 1,000 by default.
        Lower it only to see rollovers sooner (a bench).
    object_collect_interval_s: seconds between two passes of the
        broker's collector (each drawn at random from half to one and a
        half of it, so brokers keep out of step): it releases commit
        records whose ledgers were compacted or deleted and deletes
        orphaned objects (docs/object-storage.md, "Collection"). 300 by
        default; above 0.
    object_spill_max_bytes: bytes of its commit objects a broker keeps
        on local disk (``<data dir>/object-spill/``, emptied at start; a
        cache, never synced) so that each ledger it seals is compacted into
        chunks from them, no GET (docs/object-storage.md, "Compaction"): 2
        GiB by default, about 15 minutes of 10,000 topics at 20,000 msg/s of
        100-byte entries. 0: keep 16 MiB in memory instead (most ledgers of
        many topics are then compacted from the store or indexed).
    object_copies_max_bytes: bytes of commit objects a broker copies to
        local disk (``<data dir>/object-copies/``, emptied at start; a cache,
        never synced) so that the ledgers it opens from the store (a
        takeover's recoveries, a load after a move) are compacted into
        chunks, each commit object read by one GET for all of them, not
        indexed (a lone cold read of an indexed ledger costs a GET per
        section; docs/object-storage.md, "A takeover's ledgers"): 2 GiB by
        default. 0: index them, as before.
    object_close_compact_s: seconds a clean shutdown lets the compactions
        of the ledgers it sealed finish (from the bytes it kept: a PUT each,
        and the whole PUT budget is theirs then), 10 by default; 0: none.
        Only the closing broker has those bytes: a ledger it leaves
        uncompacted is compacted by whoever opens it next, from the store
        (at small sections an index object, whose lone cold read costs a
        GET per section; docs/object-storage.md, "A clean shutdown").
    max_open_ledger_files: segment files open at once (``handles.py``): the
        least recently used idle ones are closed and opened again on use, so
        open files stay bounded whatever the number of topics. 0 (the
        default): half the process's open-file limit, its soft limit raised
        to the hard one at start (at most 32,768). Otherwise lowered at
        start to half the limit when that is smaller.
    """

    sync_policy: str = "always"
    sync_interval_ms: int = 100
    max_entries_per_ledger: int = 50_000
    max_ledger_bytes: int = 512 * 1024 * 1024
    max_ledger_age_s: float = 4 * 3600
    retention_time_s: float = 0
    retention_size_bytes: int = 0
    cursor_persist_interval_ms: int = 0
    read_cache_bytes: int = 32 * 1024 * 1024
    cache_budget_bytes: int = 256 * 1024 * 1024
    backend: str = "file"
    object_store_url: str = ""
    object_storage_profile: str = "latency"
    object_commit_interval_ms: int = 250
    object_commit_max_bytes: int = 8 * 1024 * 1024
    object_put_budget_per_s: float = 250.0
    object_put_budget_floor_per_s: float = 25.0
    object_layout: int = 3
    object_sections_per_ledger: int = 1000
    object_collect_interval_s: float = 300.0
    object_spill_max_bytes: int = 2 * 1024 * 1024 * 1024
    object_copies_max_bytes: int = 2 * 1024 * 1024 * 1024
    object_close_compact_s: float = 10.0
    max_open_ledger_files: int = 0
    journal: bool = True
    journal_checkpoint_interval_ms: int = 10_000
    journal_file_bytes: int = 64 * 1024 * 1024
    journal_direct_bytes: int = 256 * 1024
    segment_direct_io: bool = True

    def __post_init__(self) -> None:
        if self.sync_policy not in SYNC_POLICIES:
            raise ValueError(
                f"sync_policy must be one of {', '.join(SYNC_POLICIES)}; got {self.sync_policy!r}"
            )
        _positive(self, "sync_interval_ms")
        _positive(self, "max_entries_per_ledger")
        _positive(self, "max_ledger_bytes")
        _positive(self, "max_ledger_age_s")
        _non_negative(self, "retention_time_s")
        _non_negative(self, "retention_size_bytes")
        _non_negative(self, "cursor_persist_interval_ms")
        _non_negative(self, "read_cache_bytes")
        _non_negative(self, "cache_budget_bytes")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {self.backend!r}")
        _positive(self, "object_commit_interval_ms")
        _positive(self, "object_commit_max_bytes")
        _non_negative(self, "object_put_budget_per_s")
        _non_negative(self, "object_put_budget_floor_per_s")
        if self.object_layout not in (1, 2, 3):
            raise ValueError(f"object_layout must be 1, 2 or 3; got {self.object_layout!r}")
        sections = self.object_sections_per_ledger
        if isinstance(sections, bool) or not isinstance(sections, int) or not (
                MIN_SECTIONS_PER_LEDGER <= sections <= MAX_SECTIONS_PER_LEDGER):
            raise ValueError(f"object_sections_per_ledger must be an integer from {MIN_SECTIONS_PER_LEDGER} "
                             f"to {MAX_SECTIONS_PER_LEDGER}; got {sections!r}")
        _non_negative(self, "object_spill_max_bytes")
        _non_negative(self, "object_copies_max_bytes")
        _non_negative(self, "object_close_compact_s")
        _positive(self, "object_collect_interval_s")
        if self.object_storage_profile not in STORAGE_PROFILES:
            raise ValueError(f"object_storage_profile must be one of {', '.join(STORAGE_PROFILES)}; "
                             f"got {self.object_storage_profile!r}")
        if self.object_commit_max_bytes > MAX_OBJECT_BYTES:
            raise ValueError(f"object_commit_max_bytes must be at most {MAX_OBJECT_BYTES} (S3's largest PUT); "
                             f"got {self.object_commit_max_bytes!r}")
        if self.backend == "object":
            if not self.object_store_url:
                raise ValueError('backend = "object" needs object_store_url (s3://BUCKET/PREFIX?endpoint=...)')
            try:
                parse_url(self.object_store_url)
            except ObjectStoreConfigError as exc:
                raise ValueError(str(exc)) from None
        _non_negative(self, "max_open_ledger_files")  # 0: sized from the open-file limit
        if not isinstance(self.journal, bool):
            raise ValueError(f"journal must be true or false; got {self.journal!r}")
        _positive(self, "journal_checkpoint_interval_ms")
        _positive(self, "journal_file_bytes")
        _non_negative(self, "journal_direct_bytes")

    @property
    def journaled(self) -> bool:
        """Whether segment files go through the journal (``journal``, not policy ``never``)."""
        return self.journal and self.sync_policy != "never"


@dataclass(frozen=True)
class RetentionPolicy:
    """One managed ledger's retention, replacing the ``retention_*`` settings
    of :class:`StorageConfig` for it (``ManagedLedger.set_retention``).

    The rule is Pulsar's namespace retention: a closed ledger that every
    durable cursor has consumed is deleted once *either* limit is exceeded:
    it was closed more than ``time_s`` ago, or the managed ledger's size
    (counting it) is above ``size_bytes``. ``math.inf`` removes a limit; both
    infinite keeps consumed ledgers forever; both 0 deletes them at once.
    (StorageConfig's own rule differs: there both limits must be exceeded.)
    Negative or NaN values raise ``ValueError``.
    """

    time_s: float
    size_bytes: float

    def __post_init__(self) -> None:
        for name in ("time_s", "size_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or value < 0:
                raise ValueError(f"{name} must be a number >= 0 (math.inf: no limit); got {value!r}")


def _number(config: StorageConfig, name: str) -> float:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number; got {value!r}")
    return value


def _positive(config: StorageConfig, name: str) -> None:
    if not _number(config, name) > 0:
        raise ValueError(f"{name} must be > 0; got {getattr(config, name)!r}")


def _non_negative(config: StorageConfig, name: str) -> None:
    if not _number(config, name) >= 0:
        raise ValueError(f"{name} must be >= 0; got {getattr(config, name)!r}")
