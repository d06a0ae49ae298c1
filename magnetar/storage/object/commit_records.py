"""The index of format-2 ledgers: one record per commit, not one per ledger.

``/object-commits/<writer>/<seq:012d>``: ``{"o": object key, "s": [[ledger
id, first, count, offset, length], ...]}``, every format-2 ledger's section
in one commit object (at most ``RECORD_LEDGERS`` of them; a larger commit
writes several records, each its own transaction). A commit of a writer
costs etcd one record and two compares (:mod:`.writer_fence`), whatever the
number of ledgers it carries (bench/object_commit_metadata.py measures it).

- **Commit** (:func:`record_sections`): compare the writer's fence, put the
  record. A failed compare: read the fence, refuse the ledgers it names,
  retry the rest.
- **Recovery** (:class:`RecordScans`): a ledger's sections are in its
  writer's records numbered from the ledger record's ``from``. The records
  are read page by page; the recoveries of many ledgers of one writer that
  come together (a takeover) share one read, and a recovery only ever joins
  a read that has not begun yet (so it sees every commit before its fence).
  A dead writer's records are final: read once for every wave of its
  takeover (:mod:`.final_records`).
- **Release** (:func:`sweep_records`, run by the collector): a record whose
  ledgers are all compacted or deleted is deleted; one that keeps at most
  half its sections is rewritten without the others (consolidated), so
  records of long-open ledgers shrink to those ledgers' sections; one that
  keeps more than half is left as it is (a rewrite would save fewer bytes
  than it costs a transaction). A record whose object is younger than
  the collector's age bound is left undecoded until it is older (its
  object could not be deleted yet anyway). etcd then holds, per writer, at most twice
  the sections of its ledgers not compacted at the last pass (each at most
  ``MAX_SECTIONS_PER_LEDGER``, then it rolls and is compacted), plus what
  one collector interval and the age bound committed; a writer's fence key goes once its
  session ended and no record is left. A pass costs etcd a read per page
  of records, one keys-only listing of the ledgers (their markers with
  them), a read of each named ledger's record the listing lacks (many at
  once) and a transaction per ``SWEEP_WRITES`` records it
  deletes or rewrites; at 10,000 topics it meets tens of thousands of records,
  and each call competes with the commits' own transactions.

Failure modes: ``MetadataError`` (and ``ValueError`` for an oversized
transaction) from the store; the commit's caller treats those as an
unknown outcome.
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from typing import Callable, Iterable

from ...metadata.store import (
    MAX_TRANSACTION_BYTES, BadVersion, Compare, Delete, KeyNotFound, MetadataStore, Put, Record,
    TransactionFailed,
)
from . import final_records
from .final_records import FinalRecords
from .index import ROOT, Section, commit_object_time_ms, ledger_key, new_section
from .writer_fence import WRITERS, WriterFence, alive_key, writer_key

log = logging.getLogger(__name__)

COMMITS = "/object-commits"
#: Ledgers per commit record: about 40 bytes each, well under etcd's 1.5 MiB request.
RECORD_LEDGERS = 4096
#: Records read by a scan's first request (later ones: as many as PAGE_BYTES holds, at most MAX_SCAN_PAGE).
SCAN_PAGE = 64
MAX_SCAN_PAGE = 1024
PAGE_BYTES = 1024 * 1024
#: A scan for at most this many ledgers tests each record's bytes before decoding it.
MARKED_LEDGERS = 8
#: A recovery waits this long for others of the same writer to share its scan.
SCAN_GATHER_S = 0.02


def record_key(writer: str, seq: int) -> str:
    return f"{COMMITS}/{writer}/{seq:012d}"


def encode_row(lid: int, first: int, count: int, offset: int, length: int) -> bytes:
    """One ledger's section as a record holds it (:func:`encode_record`)."""
    return b"[%d,%d,%d,%d,%d]" % (lid, first, count, offset, length)


def encode_rows(key: str, rows: Iterable[bytes]) -> bytes:
    """The record's JSON from its rows (:func:`encode_row`), formatted by
    hand: ``json.dumps`` of a list per section cost 3.6 times as much at
    10,000 ledgers a commit."""
    return b'{"o":%s,"s":[%s]}' % (json.dumps(key).encode(), b",".join(rows))


def encode_record(key: str, sections: Iterable[tuple[int, Section]]) -> bytes:
    """The record's JSON for ``(ledger id, section)`` pairs (:func:`decode_record` reads it)."""
    return encode_rows(key, [encode_row(lid, s.first, s.count, s.offset, s.length) for lid, s in sections])


def decode_record(value: bytes) -> tuple[str, list[tuple[int, Section]]]:
    doc = json.loads(value)
    key = str(doc["o"])
    return key, [(int(lid), new_section(int(first), int(n), key, int(off), int(length)))
                 for lid, first, n, off, length in doc["s"]]


async def record_sections(store: MetadataStore, fence: WriterFence, sections: dict[int, Section],
                          count: Callable[[], None] = lambda: None) -> tuple[list[int], list[int]]:
    """Record ``sections`` (ledger id -> its section, all in one object) in
    commit records of ``fence``'s writer: :func:`record_rows` of them."""
    ids = list(sections)
    if not ids:
        return [], []
    rows = [encode_row(lid, s.first, s.count, s.offset, s.length) for lid, s in sections.items()]
    return await record_rows(store, fence, sections[ids[0]].key, ids, rows, count)


async def record_rows(store: MetadataStore, fence: WriterFence, key: str, ids: list[int], rows: list[bytes],
                      count: Callable[[], None] = lambda: None) -> tuple[list[int], list[int]]:
    """Record the sections of ledgers ``ids`` in object ``key`` (``rows[i]``:
    ``ids[i]``'s section, :func:`encode_row`) in commit records of
    ``fence``'s writer. Returns (ledgers committed, ledgers fenced:
    refused). ``count`` is called per transaction tried.
    MetadataError/ValueError: outcome unknown for the ledgers not returned.

    Rows, not :class:`~.index.Section` objects: the committer makes one per
    ledger per commit (10,000 at 10,000 written topics) and encodes each once."""
    if len(ids) <= RECORD_LEDGERS:
        return await _record_part(store, fence, key, ids, rows, count)
    done = await asyncio.gather(*(_record_part(store, fence, key, ids[i:i + RECORD_LEDGERS],
                                               rows[i:i + RECORD_LEDGERS], count)
                                  for i in range(0, len(ids), RECORD_LEDGERS)))
    return [i for c, _ in done for i in c], [i for _, f in done for i in f]


async def _record_part(store: MetadataStore, fence: WriterFence, key: str, ids: list[int], rows: list[bytes],
                       count: Callable[[], None]) -> tuple[list[int], list[int]]:
    refused: list[int] = []
    while ids:
        if fence.dead:
            return [], refused + ids
        fenced = fence.fenced
        # Most commits name no fenced ledger: one set test, not one per ledger
        # (the set grows with the writer's deleted ledgers, and stays).
        if fenced and not fenced.isdisjoint(ids):
            keep = [i for i, lid in enumerate(ids) if lid not in fenced]
            refused += [lid for lid in ids if lid in fenced]
            ids, rows = [ids[i] for i in keep], [rows[i] for i in keep]
            if not ids:
                break
        value = encode_rows(key, rows)
        try:
            count()
            await store.transaction(fence.compares(), [Put(record_key(fence.writer, fence.take_seq()), value)],
                                    versions=False)
            return ids, refused
        except TransactionFailed:
            await fence.refresh(store)  # who was fenced: refused above at the next turn
    return [], refused


class RecordScans:
    """Recoveries' reads of writers' commit records, shared (module docstring)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._next: dict[str, _Scan] = {}  # writer -> the scan not begun yet
        #: Dead writers' records decoded once for all their recoveries (:mod:`.final_records`).
        self._final: dict[str, FinalRecords] = {}
        self._too_many: set[str] = set()  # dead writers whose records passed final_records.MAX_SECTIONS
        self.reads = 0  # scans that read the store

    async def sections(self, writer: str, since: int, ledger_id: int) -> list[Section]:
        """The sections of ``ledger_id`` in ``writer``'s records numbered
        ``since`` or later, in entry order (MetadataError)."""
        scan = self._next.get(writer)
        if scan is None:
            scan = self._next[writer] = _Scan()
            scan.task = asyncio.get_running_loop().create_task(self._run(writer, scan))
        scan.wanted[ledger_id] = since
        found = await asyncio.shield(scan.task)
        return sorted(found.get(ledger_id, []), key=lambda s: s.first)

    async def _run(self, writer: str, scan: "_Scan") -> dict[int, list[Section]]:
        await asyncio.sleep(SCAN_GATHER_S)
        if self._next.get(writer) is scan:
            del self._next[writer]  # begun: later recoveries start the next one
        wanted = dict(scan.wanted)
        since = min(wanted.values())
        for other in [w for w, final in self._final.items() if final.stale()]:
            del self._final[other]
        final = self._final.get(writer)
        if final is not None and final.serves(since, wanted):
            return final.take(wanted)
        self.reads += 1
        # A takeover's wave (more than a load or a compaction asks for) of a dead writer: keep all of it.
        if len(wanted) > MARKED_LEDGERS and writer not in self._too_many \
                and await self.store.get(alive_key(writer)) is None:
            try:
                found = await read_records(self.store, writer, since, None, final_records.MAX_SECTIONS)
            except TooManySections:
                self._too_many.add(writer)
            else:
                final = self._final[writer] = FinalRecords(since, found)
                return final.take(wanted)
        return await read_records(self.store, writer, since, set(wanted))


class _Scan:
    def __init__(self) -> None:
        self.wanted: dict[int, int] = {}
        self.task: asyncio.Task | None = None


class TooManySections(Exception):
    """:func:`read_records` of every ledger found more than its bound."""


async def read_records(store: MetadataStore, writer: str, since: int, ledgers: "set[int] | None",
                       max_sections: int | None = None) -> dict[int, list[Section]]:
    """The sections of ``ledgers`` (None: of every ledger named) in
    ``writer``'s records from ``since`` on, read a page of records per
    request (MetadataError; ``TooManySections`` past ``max_sections`` in all).

    A page is ``SCAN_PAGE`` records at first, then as many as ``PAGE_BYTES``
    holds at the largest record seen so far, at most ``MAX_SCAN_PAGE`` (a
    store whose answers have a size cap, etcd's gRPC, splits a page that
    passes it). A record is decoded only if it may name a wanted ledger
    (:func:`_markers`)."""
    base = f"{COMMITS}/{writer}"
    found: dict[int, list[Section]] = {}
    start, limit, largest = f"{since:012d}", SCAN_PAGE, 1
    markers = None if ledgers is None else _markers(ledgers)
    kept = 0
    while True:
        page = await store.children_records(base, start, limit)
        for record in page:
            largest = max(largest, len(record.value))
            if not record.key.rsplit("/", 1)[-1].isdigit():
                continue
            if markers is not None and not any(m in record.value for m in markers):
                continue
            rows = decode_record(record.value)[1]
            if ledgers is None:
                kept += len(rows)
                if max_sections is not None and kept > max_sections:
                    raise TooManySections(f"writer {writer}: more than {max_sections} sections in its records")
            for lid, section in rows:
                if ledgers is None or lid in ledgers:
                    found.setdefault(lid, []).append(section)
        if len(page) < limit:
            return found
        start = page[-1].key.rsplit("/", 1)[-1] + "\x00"  # just after it
        limit = max(1, min(MAX_SCAN_PAGE, PAGE_BYTES // largest))


def _markers(ledgers: set[int]) -> list[bytes] | None:
    """Byte strings one of which a record naming one of ``ledgers`` holds
    (each section is ``[ledger id,``; nothing else in a record starts with
    ``[`` and a digit): a cheap test before decoding a record, for a scan
    of a few ledgers (a load, a compaction). None: decode every record."""
    if len(ledgers) > MARKED_LEDGERS:
        return None
    return [b"[%d," % lid for lid in ledgers]


#: Ledgers missing from its listing whose records a sweep reads at once.
SWEEP_MARKER_READS = 256
#: Records deleted or rewritten per transaction (each a compare and a write; etcd caps a transaction at 128 ops).
SWEEP_WRITES = 100


async def sweep_records(store: MetadataStore, *, young_s: float = 0.0, now: float | None = None) -> set[str]:
    """Delete or consolidate commit records (module docstring); delete the
    fence keys of writers whose session ended with no record left. Returns
    the object keys the remaining records name (the collector keeps those).

    ``young_s``: a record whose object was written less than this long
    before ``now`` (``time.time()`` if None; the time is in the object's
    key) is left as it is and its object named, its rows not decoded. The
    collector passes its own age bound (``COLLECT_AFTER_S``): such an
    object is not deletable yet anyway, and at 10,000 written topics most
    records are that young; decoding every row of every record was ~60 s
    of a loop already 85 % busy, and tipped the commits into the few,
    large, slow ones (issue 41). Their ledgers' dead rows are released
    at a later pass, once the object is old enough.

    A pass reads each writer's records a page at a time (each record's
    rows as JSON lists, no section objects), then what it needs of the
    ledgers they name (once per pass): one keys-only listing of
    ``/object-ledgers`` says which exist and which have a compacted
    marker, and the records of those missing from it are read,
    ``SWEEP_MARKER_READS`` at a time. A ledger is taken for dead on its
    marker (final, whenever listed) or on its record read gone after the
    records naming it: never for being missing from a listing, which may
    be older than the ledger;
    it writes in shared transactions, each record's write under a compare
    of the version it read. A record is rewritten only when it keeps at most
    half its sections (deleted when it keeps none). A compare that fails
    (another collector, a concurrent rewrite) leaves that record alone; the
    rest of its transaction is tried again. MetadataError from the store."""
    sweep = _Sweep(store)
    if young_s > 0:
        sweep.young_after_ms = int(((time.time() if now is None else now) - young_s) * 1000)
    writers = set(await store.children(COMMITS)) | set(await store.children(WRITERS))
    for writer in sorted(writers):
        if not await sweep.writer(writer) and await store.get(alive_key(writer)) is None:
            fence = await store.get(writer_key(writer))
            if fence is not None:
                try:
                    await store.delete(writer_key(writer), fence.version)
                except (BadVersion, KeyNotFound):
                    pass
    await sweep.flush()
    _DEAD[store] = sweep.dead_kept
    return sweep.named


def young_object(value: bytes, after_ms: int) -> str | None:
    """The object a commit record names if it was written after
    ``after_ms`` (unix ms, from its key), read off the record's head
    (``{"o":"<key>",``: :func:`encode_rows`) without decoding its rows;
    else None (older, or a head this does not know: decode it)."""
    if not value.startswith(b'{"o":"'):
        return None
    end = value.find(b'"', 6)
    if end < 0:
        return None
    try:
        key = value[6:end].decode("ascii")
    except UnicodeDecodeError:
        return None
    if "\\" in key:  # escaped: not a key this writes
        return None
    written = commit_object_time_ms(key)
    return key if written is not None and written > after_ms else None


#: Per store: the dead ledgers the last pass left named in records (:class:`_Sweep`).
_DEAD: "weakref.WeakKeyDictionary[MetadataStore, set[int]]" = weakref.WeakKeyDictionary()


class _Sweep:
    """One pass of :func:`sweep_records`: what it learnt of ledgers, and its writes not made yet."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.named: set[str] = set()
        # Exists and not compacted. Compaction and deletion are final, so the
        # ledgers found dead in records left as they were are known dead
        # in the next pass too (its markers are not read again).
        self.live: dict[int, bool] = dict.fromkeys(_DEAD.get(store, ()), False)
        self.dead_kept: set[int] = set()  # dead ledgers of records left as they are
        self.listed: set[int] | None = None  # /object-ledgers, listed once at the first page's ledgers
        self.compacted: set[int] = set()  # of those, the ledgers with a marker then
        self.pending: list[tuple[Record, str, bytes | None]] = []  # record, its object, new value (None: delete)
        self.pending_bytes = 0
        #: Records naming an object written after this (unix ms) are left
        #: as they are, undecoded (None: every record decoded).
        self.young_after_ms: int | None = None
        self.young = 0  # records so left, this pass

    async def writer(self, writer: str) -> bool:
        """Sweep ``writer``'s records; False if it had none when first read."""
        base = f"{COMMITS}/{writer}"
        start, limit, largest, any_record = "", SCAN_PAGE, 1, False
        while True:
            page = await self.store.children_records(base, start, limit)
            decoded = []
            young_after = self.young_after_ms
            for record in page:
                largest = max(largest, len(record.value))
                if record.key.rsplit("/", 1)[-1].isdigit():
                    if young_after is not None:
                        okey = young_object(record.value, young_after)
                        if okey is not None:
                            self.named.add(okey)
                            self.young += 1
                            continue
                    # Its rows as JSON's lists, no Section each (decode_record):
                    # at 10,000 topics a pass meets ~40,000 records of ~200
                    # rows, and making the sections was 60 % of its time.
                    doc = json.loads(record.value)
                    decoded.append((record, str(doc["o"]), doc["s"]))
            any_record = any_record or bool(page)
            await self._learn({row[0] for _, _, rows in decoded for row in rows})
            live = self.live
            for record, okey, rows in decoded:
                kept = [row for row in rows if live[row[0]]]
                if not kept:
                    await self._write(record, okey, None)
                    continue
                if 2 * len(kept) <= len(rows):  # shrinks by half at least: worth a write
                    await self._write(record, okey, encode_rows(okey, [encode_row(*row) for row in kept]))
                elif len(kept) < len(rows):
                    self.dead_kept.update(row[0] for row in rows if not live[row[0]])
                self.named.add(okey)
            if len(page) < limit:
                return any_record
            start = page[-1].key.rsplit("/", 1)[-1] + "\x00"  # just after it
            limit = max(1, min(MAX_SCAN_PAGE, PAGE_BYTES // largest))

    async def _learn(self, ids: set[int]) -> None:
        """Liveness of ``ids``, named by the page just read. A ledger is
        taken for dead on proof: its compacted marker (final, so the one
        listing of ``/object-ledgers``' keys per pass proves it, whenever
        it was made), or its record absent when read after the page, so
        after the records naming it were written (never for being missing
        from the listing, which may be older than the ledger). A ledger
        listed without a marker is live (one compacted since is kept one
        more pass: a marker read per live ledger was 10,000 reads a pass at
        10,000 topics); one missing from the listing has its record read
        (one created meanwhile is live, compacted or not)."""
        ids -= self.live.keys()
        if not ids:
            return
        if self.listed is None:
            self.listed = set()
            for key in await self.store.keys_below(ROOT):  # keys only: ledgers, their markers and chunk records
                lid, _, rest = key.partition("/")
                if lid.isdigit():
                    if not rest:
                        self.listed.add(int(lid))
                    elif rest == "compacted":
                        self.compacted.add(int(lid))
        for lid in ids & self.compacted:
            self.live[lid] = False
        for lid in (ids & self.listed) - self.compacted:
            self.live[lid] = True
        unlisted = sorted(ids - self.listed - self.compacted)
        for i in range(0, len(unlisted), SWEEP_MARKER_READS):
            batch = unlisted[i:i + SWEEP_MARKER_READS]
            found = await asyncio.gather(*(self.store.get(ledger_key(lid)) for lid in batch))
            for lid, record in zip(batch, found):
                self.live[lid] = record is not None  # its record there: it exists

    async def _write(self, record: Record, okey: str, value: bytes | None) -> None:
        size = len(record.key) * 2 + (len(value) if value is not None else 0)
        if len(self.pending) >= SWEEP_WRITES or self.pending_bytes + size > MAX_TRANSACTION_BYTES // 2:
            await self.flush()
        self.pending.append((record, okey, value))
        self.pending_bytes += size

    async def flush(self) -> None:
        """Make the pending writes, in one transaction; a record whose
        compare fails is left as it is (its object stays named)."""
        pending, self.pending, self.pending_bytes = self.pending, [], 0
        while pending:
            try:
                await self.store.transaction(
                    [Compare(r.key, r.version) for r, _, _ in pending],
                    [Delete(r.key) if v is None else Put(r.key, v) for r, _, v in pending], versions=False)
                return
            except TransactionFailed as exc:
                failed = set(exc.keys)
                if not failed & {r.key for r, _, _ in pending}:
                    failed = {r.key for r, _, _ in pending}  # not said which: leave them all
                self.named.update(okey for r, okey, _ in pending if r.key in failed)
                pending = [p for p in pending if p[0].key not in failed]
