"""Keeping the object backend's index small: compacting sealed ledgers and
collecting orphaned objects.

**Compaction** (:func:`compact_ledger`): a sealed ledger's sections, one
per commit that carried its entries (up to ``MAX_SECTIONS_PER_LEDGER``),
are rewritten into per-ledger chunk objects of about ``CHUNK_BYTES``
(``ledgers/<id>/<first>``), recorded under ``c/``, then the ``compacted``
marker, then the ``s/`` records are deleted. Readers use ``c/`` once the
marker exists, so a crash at any step leaves a readable ledger (and
compacting again redoes it: chunk objects are deterministic; a crash after
the marker leaves section records that readers ignore, and the collector
deletes). A compaction works
only from the index as it is when it starts, and never once the marker
exists: an owner paused past its session compacts nothing from the index it
read before. Each chunk PUT takes a token of the broker's PUT
budget (:mod:`.put_budget`), like a commit, but as a background PUT: in
line with the other compactions, and within a share of the budget. A compacted
ledger costs the index ``ceil(size / CHUNK_BYTES) + 2`` keys. Ledgers
sealed together (a rollover of many topics written together, a takeover)
are compacted in lockstep (:class:`~.range_gets.Lockstep`): chunk by
chunk, their sections are fetched together, one ranged GET per commit
object for all of them. A writer's own ledger, sealed with every commit
of it successful, is compacted from the bytes it kept
(:mod:`.kept_sections`): no GET, and no read of the index while the ledger
record is still at the writer's epoch. A ledger of small sections
compacted from the store (``indexed``) moves no data: its section list
becomes one index object and the marker names it (:mod:`.ledger_index`);
the markers of ledgers indexed about the same time share a transaction
(:mod:`.marker_batches`).

**Collection** (:func:`collect_orphans`): format-2 commit records whose
ledgers are all compacted or deleted go, those with some of them are
rewritten without them (:func:`~.commit_records.sweep_records`); a commit
object is garbage when no ``s/`` record and no commit record names it
and no indexed ledger's span covers it (its ledgers were compacted into
chunks or deleted, or its commit failed: a zombie's, a crashed write's), once it is older than
``COLLECT_AFTER_S`` (commits give up after ``MAX_COMMIT_AGE_S``, far less,
so no transaction can still come to name it). Chunk objects of a deleted
ledger are deleted with it; those its index never named (a compaction that
found the ledger deleted, or was cut short by the deletion or a crash) are
collected once the ledger's record is gone: ledger ids are never reused,
so a ledger without a record never gets one again.

Failure modes: ``StorageError`` (metadata or object store unreachable);
nothing is lost by an interrupted run, it is redone at the next.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Sequence

from ...metadata.store import Compare, Delete, MetadataError, MetadataStore, Put, TransactionFailed
from ...objectstore.store import ObjectNotFound, ObjectStore, ObjectStoreError
from ..errors import StorageError
from .commit_records import RecordScans, read_records, sweep_records
from .marker_batches import PUTS_PER_MARKER, MarkerBatches
from .put_budget import PutBudget
from .range_gets import Lockstep
from .section_columns import SectionColumns
from .ledger_index import encode_index, index_object, indexed_marker, marker_index, spanned, spans
from .index import (
    ROOT, Section, chunk_key, chunk_object, chunk_object_ledger, commit_object_time_ms, compacted_key, contiguous,
    ledger_key, ledger_layout, new_section, read_sections, section_key, write_in_chunks,
)

log = logging.getLogger(__name__)

CHUNK_BYTES = 4 * 1024 * 1024
COLLECT_AFTER_S = 600.0


class WriterMayCompact(Exception):
    """:func:`compact_ledger` left an opened ledger alone: its writer is
    alive and may be chunking it from its kept bytes (:mod:`.live_writers`)."""


async def compact_ledger(store: MetadataStore, objects: ObjectStore, ledger_id: int,
                         sections: "Sequence[Section]", lockstep: Lockstep | None = None,
                         budget: PutBudget | None = None, *, kept: "Sequence[bytes] | None" = None,
                         epoch: int | None = None, scans: RecordScans | None = None,
                         indexed: bool = False, markers: "MarkerBatches | None" = None,
                         layout: int | None = None,
                         writer_compacting: "Callable[[str], Awaitable[bool]] | None" = None) -> list[Section]:
    """Rewrite the sealed ledger's ``sections`` (contiguous, as committed)
    into chunks; return the chunks' sections (``[]``, changing nothing in
    the index, if the ledger was deleted or fenced meanwhile: every write
    compares the ledger record). See the module docstring.

    ``indexed``: move no data: write ``sections`` as the ledger's index
    object (:mod:`.ledger_index`), one PUT (a background token of
    ``budget``), then the marker naming it and the commit objects it
    spans; return ``sections`` (its entries stay where they are). With
    ``markers`` that marker goes in a transaction shared with other
    ledgers' (:mod:`.marker_batches`), else in one of its own; so do a
    ledger's chunk records and marker when compacted from ``kept``.

    With ``lockstep`` (the caller joined it, and leaves it after), its
    reads go with those of the other compactions running beside it (each
    commit object they share read by one GET); else each section is its
    own ranged GET. Anything with that ``fetch`` will do: the local copies
    of the commit objects (:mod:`.commit_copies`) chunk a ledger opened
    from the store without a GET per wave of them. With ``budget`` (the broker's PUT budget), each chunk
    PUT takes a token first (``acquire_background``: in line, within a
    share of the rate), so compactions share the bill's bound and commits
    keep most of it.

    ``epoch``: the ledger record's version under which this writer
    committed every one of ``sections``, all of its commits successful
    (None: not known, a ledger opened from the store or with a failed
    commit). While the record is still at ``epoch`` nobody else ever wrote
    its index, so the index is ``sections``: no read of it to check (for
    format 2 a scan of the writer's commit records since the ledger began:
    at 10,000 topics and 1,000 sections a round's scan read and decoded
    ~50,000 records, a third of the broker's loop). Otherwise (the record
    moved on: fenced) the index as it is now decides. ``kept`` (with
    ``epoch``): the bytes of each of ``sections``, kept by that writer
    (:mod:`.kept_sections`): no GET either. With ``layout`` too (the
    ledger record's, which its writer knows) it reads nothing at all:
    the writes compare the record at ``epoch`` and the marker absent (two
    gets per compaction on the loop, ~30 compactions a second at 10,000
    written topics); only if they fail (the ledger deleted, fenced or
    compacted elsewhere meanwhile) does it read, and go on as the reads
    decide (fenced: compacted from the index and the store).

    ``writer_compacting`` (a ledger opened from the store, to be indexed
    or chunked from copies): asked with its format-2 writer once the marker is
    found absent and the record unfenced; True raises
    :class:`WriterMayCompact`, nothing written.

    ``sections``: a list, or the ledger's own
    :class:`~.section_columns.SectionColumns` (read by column: a
    compaction from ``kept`` makes no section object per section).

    A format-2 ledger's sections as recorded now are in its writer's commit
    records, and it has no ``s/`` records to delete: the collector releases
    the commit records once it is compacted. With ``scans`` (the backend's
    :class:`~.commit_records.RecordScans`) the compactions of one writer's
    ledgers that start together share one read of its records (one begun
    after each of them read the ledger record: the index as it is now)."""
    if not isinstance(sections, SectionColumns):
        sections = SectionColumns(sections)
    # Its writer's own, sealed whole: ``sections`` is the index while the
    # record is at ``epoch``, and every write below compares that.
    assumed = kept is not None and epoch is not None and layout is not None and len(kept) == len(sections)
    try:
        if assumed:
            version = epoch
        else:
            record = await store.get(ledger_key(ledger_id))
            if record is None:
                return []
            # ``sections`` may be stale: an owner paused past its session recovers
            # from the index it read before, while the new owner has recovered
            # more entries and compacted them. Compacting the stale list would
            # record fewer entries than the ledger holds (the 1,000-fault soak lost
            # a topic that way). Only the index as it is now is compacted, and only
            # while nobody has compacted it: every write compares the marker absent.
            if await store.get(compacted_key(ledger_id)) is not None:
                return []
            # Still at the epoch its writer committed every section under: nobody
            # else wrote its index, which is ``sections``. Else the index decides.
            version = record.version
            trusted = epoch is not None and version == epoch
            if kept is not None and (not trusted or len(kept) != len(sections)):
                kept = None  # fenced since, or not all of it
            layout, doc = ledger_layout(record.value)
            # Not once fenced: its writer's own compaction then fails its compare.
            if writer_compacting is not None and layout == 2 and doc.get("state") != "fenced" \
                    and await writer_compacting(str(doc["writer"])):
                raise WriterMayCompact(ledger_id)
            if not trusted and sections != contiguous(await _recorded(store, ledger_id, layout, doc, scans)):
                log.info("ledger %d: the index changed since it was read: not compacted from the old one", ledger_id)
                return []
        still = [Compare(ledger_key(ledger_id), version)]
        uncompacted = still + [Compare(compacted_key(ledger_id), -1)]
        if indexed:
            listed = list(sections)  # read more than once below
            key = index_object(ledger_id)
            blob = encode_index(listed)
            if budget is not None and budget.limited:
                await budget.acquire_background()
            await objects.put(key, blob, if_absent=False)  # the same list if a run before us got here
            marker = indexed_marker(listed[-1].end(), key, spans(listed))
            # No c/ records: the marker names the index object, written before it.
            await _finish(store, ledger_id, layout, listed, [Put(compacted_key(ledger_id), marker)],
                          uncompacted, still, markers)
            log.info("compacted ledger %d: %d sections into index object %s (%d bytes), no data moved",
                     ledger_id, len(listed), key, len(blob))
            return listed
        chunks: list[Section] = []
        for start, end in _group_ranges(sections.lengths):
            if kept is not None:
                parts = kept[start:end]
            else:
                group = sections[start:end]
                if lockstep is not None:
                    parts = await lockstep.fetch([(s.key, s.offset, s.offset + s.length) for s in group])
                else:
                    parts = await asyncio.gather(*(objects.get(s.key, s.offset, s.offset + s.length)
                                                   for s in group))
            blob = b"".join(parts)
            first = sections.firsts[start]
            key = chunk_object(ledger_id, first)
            if budget is not None and budget.limited:
                await budget.acquire_background()
            await objects.put(key, blob, if_absent=False)  # same bytes if a run before us got here
            chunks.append(new_section(first, sum(sections.counts[start:end]), key, 0, len(blob)))
        puts = [Put(chunk_key(ledger_id, c.first), c.encode()) for c in chunks]
        entries = chunks[-1].end() if chunks else 0
        puts.append(Put(compacted_key(ledger_id), f'{{"entries":{entries}}}'.encode()))  # last: the switch
        # From kept bytes (a writer's, sealed whole: at 10,000 topics ~32 a second), the chunk
        # records and marker share transactions with other markers, as indexed ones do.
        await _finish(store, ledger_id, layout, sections, puts, uncompacted, still,
                      markers if kept is not None else None)
    except TransactionFailed:
        if assumed:  # what reads would have found out: compacted as they decide (fenced: from the store)
            return await compact_ledger(store, objects, ledger_id, sections, lockstep, budget, kept=kept,
                                        epoch=epoch, scans=scans, indexed=indexed, markers=markers)
        log.info("ledger %d was deleted or fenced while being compacted: left as it is", ledger_id)
        return []
    except (MetadataError, ObjectStoreError) as exc:
        raise StorageError(f"compacting ledger {ledger_id} failed: {exc}") from exc
    log.info("compacted ledger %d: %d sections into %d chunks", ledger_id, len(sections), len(chunks))
    return chunks


async def _finish(store: MetadataStore, ledger_id: int, layout: int, sections: list[Section], puts: list,
                  uncompacted: list, still: list, markers: "MarkerBatches | None" = None) -> None:
    """Write ``puts`` (the marker last) while the ledger is uncompacted
    (with ``markers``, a few of them: in a transaction shared with other ledgers'),
    then delete a format-1 ledger's section records (format 2: its sections
    are in commit records, released by the collector). The deletes come
    after the marker, so they compare the ledger record only."""
    if markers is not None and len(puts) <= PUTS_PER_MARKER:
        await markers.write(uncompacted, puts)
    else:
        await write_in_chunks(store, uncompacted, puts)
    deletes = [Delete(section_key(ledger_id, s.first)) for s in sections] if layout == 1 else []
    await write_in_chunks(store, still, deletes)


async def _recorded(store: MetadataStore, ledger_id: int, layout: int, doc: dict,
                    scans: RecordScans | None) -> list[Section]:
    if layout == 2:
        if scans is not None:
            return await scans.sections(str(doc["writer"]), int(doc.get("from", 0)), ledger_id)
        found = await read_records(store, str(doc["writer"]), int(doc.get("from", 0)), {ledger_id})
        return sorted(found.get(ledger_id, []), key=lambda s: s.first)
    return await read_sections(store, ledger_id)


def _group_ranges(lengths: "Sequence[int]") -> list[tuple[int, int]]:
    """The sections (by their ``lengths``) of each chunk, as index ranges:
    in order, each about ``CHUNK_BYTES`` at most (a larger section is a
    chunk of its own)."""
    if sum(lengths) <= CHUNK_BYTES:
        return [(0, len(lengths))] if len(lengths) else []  # most ledgers: one chunk, no step per section
    out: list[tuple[int, int]] = []
    start = size = 0
    for i, n in enumerate(lengths):
        if i > start and size + n > CHUNK_BYTES:
            out.append((start, i))
            start, size = i, 0
        size += n
    out.append((start, len(lengths)))
    return out


async def collect_orphans(store: MetadataStore, objects: ObjectStore, *, older_than_s: float = COLLECT_AFTER_S,
                          now: float | None = None, records_older_than_s: float | None = None) -> list[str]:
    """Delete commit objects that no section record names and that are
    older than ``older_than_s``, and chunk objects of ledgers that no
    longer exist; return their keys. Commit records naming an object
    younger than ``records_older_than_s`` (None: ``older_than_s``) are left
    as they are (:func:`~.commit_records.sweep_records`' ``young_s``)."""
    now = time.time() if now is None else now
    try:
        # Objects first, then the index: a ledger created in between has no
        # object in the listing, one deleted in between is garbage anyway.
        listed = await objects.list("data/")
        chunks = await objects.list("ledgers/")
        # One listing of the index's keys (no values): the ledgers, and which
        # of them have section records (format 1; a listing per ledger was
        # one etcd call per ledger and pass). A section record written after
        # it names an object listed before it only while that commit is in
        # flight: younger than COLLECT_AFTER_S, so kept (as before).
        keys = [k.split("/") for k in await store.keys_below(ROOT)]
        ledgers = sorted({k[0] for k in keys})
        sectioned = sorted({k[0] for k in keys if len(k) > 2 and k[1] == "s"})
        named: set[str] = set()
        for lid in sectioned:
            base = f"{ROOT}/{lid}/s"
            names = await store.children(base)
            if names and lid.isdigit() and await store.get(compacted_key(int(lid))) is not None:
                # A compaction that stopped after its marker (a crash, a lost
                # session) left section records that readers ignore: drop them,
                # and their commit objects become garbage like any other.
                await write_in_chunks(store, [], [Delete(f"{base}/{n}") for n in names])
                log.info("ledger %s: deleted %d section records its compaction left", lid, len(names))
                continue
            records = await asyncio.gather(*(store.get(f"{base}/{n}") for n in names))
            named.update(Section.decode(int(n), r.value).key for n, r in zip(names, records) if r is not None)
        # Format 2's commit records: released or consolidated; the objects they still name stay.
        young_s = older_than_s if records_older_than_s is None else records_older_than_s
        named |= await sweep_records(store, young_s=young_s, now=now)
        # Listed after the sweep: a ledger whose records it released was
        # compacted before it looked, and a marker is final, so its marker is
        # in this listing. Only the markers of ledgers with no chunk record
        # are read (indexed ones: their spans name commit objects); reading
        # every ledger's was 10,000 reads a pass at 10,000 topics.
        after = [k.split("/") for k in await store.keys_below(ROOT)]
        chunked = {k[0] for k in after if len(k) > 2 and k[1] == "c"}
        indexed = sorted({k[0] for k in after if len(k) == 2 and k[1] == "compacted"} - chunked)
        named |= spanned(sorted(info.key for info in listed), await _index_spans(store, indexed))
        gone = []
        for info in listed:
            written = commit_object_time_ms(info.key)
            if info.key in named or written is None or now - written / 1000 < older_than_s:
                continue
            await objects.delete(info.key)
            gone.append(info.key)
        alive = {int(lid) for lid in ledgers if lid.isdigit()}
        for info in chunks:
            owner = chunk_object_ledger(info.key)
            if owner is None or owner in alive:
                continue
            await objects.delete(info.key)
            gone.append(info.key)
    except (MetadataError, ObjectStoreError) as exc:
        raise StorageError(f"collecting orphaned objects failed: {exc}") from exc
    if gone:
        log.info("deleted %d orphaned objects", len(gone))
    return gone


#: Markers the collector reads at once.
_MARKER_READS = 256


async def _index_spans(store: MetadataStore, ledgers: list[str]) -> list[list[str]]:
    """The commit object spans the markers of indexed ledgers name (their entries are in them)."""
    out: list[list[str]] = []
    ids = [int(lid) for lid in ledgers if lid.isdigit()]
    for i in range(0, len(ids), _MARKER_READS):
        markers = await asyncio.gather(*(store.get(compacted_key(lid)) for lid in ids[i:i + _MARKER_READS]))
        for marker in markers:
            doc = marker_index(marker.value) if marker is not None else None
            if doc is not None:
                out.extend(tuple(span) for span in doc.get("spans", ()))
    return out


async def delete_chunks(objects: ObjectStore, chunks: list[Section]) -> None:
    """Delete a deleted ledger's chunk objects (they are its alone)."""
    for c in chunks:
        await delete_object(objects, c.key)


async def delete_object(objects: ObjectStore, key: str) -> None:
    """Delete a deleted ledger's own object ``key`` (a chunk, its index
    object); one not found is gone already. StorageError if the store fails."""
    try:
        await objects.delete(key)
    except ObjectNotFound:
        pass
    except ObjectStoreError as exc:
        raise StorageError(f"deleting object {key} failed: {exc}") from exc

