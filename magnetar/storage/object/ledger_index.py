"""A sealed ledger's index as one object: compaction that moves no data.

A ledger of small sections (a topic written at a few messages a second
gets one section of ~100 bytes per commit, up to ``MAX_SECTIONS_PER_LEDGER``
of them, each in another commit object) is not worth rewriting: compacting
it from the store reads every commit object of its life to write ~100 KB.
Instead its compaction writes its section list as one object,
``ledgers/<id:020d>/index`` (:func:`index_object`: under the ledger's
prefix, so deleting and collecting treat it like its chunk objects), and
points the ``compacted`` marker at it (:func:`indexed_marker`):
``{"entries": N, "index": <key>, "spans": [[first key, last key], ...]}``.
Its entries stay where they were committed; readers GET the index object
and read the commit objects as before. The marker's ``spans`` (per
session prefix, the first and last commit object the ledger names) tell
the collector which commit objects must stay: commit object keys sort by
time within a session (:func:`~.index.commit_object`).

The object (:func:`encode_index`): a version byte (``INDEX_VERSION``), then
zlib of: the number of sections and the keys' shared prefix (each with
its length), the four integer columns (first, count, offset, length) as
little-endian int64 arrays, and the keys' suffixes joined by newlines. A
1,000-section ledger's index is a few KB. :func:`decode_index` refuses any
other version or a damaged body with ``CorruptLedgerError`` naming the
object.

Which ledgers: :func:`small_sections` (a mean section under
``SMALL_SECTION_BYTES``). No I/O here.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from array import array
from bisect import bisect_left, bisect_right
from typing import Iterable, Sequence

from ..errors import CorruptLedgerError
from .index import Section, new_section

#: The index object's format (its first byte).
INDEX_VERSION = 1
#: A ledger whose sections average less than this is compacted into an
#: index object, not chunks. Below it a chunk rewrite moves little data for
#: many GETs (one per commit object the ledger touched: ~1,000 GETs for
#: ~100 KB at 2 msg/s a topic), and what a chunk would save a later cold
#: reader is one ranged GET per section, each small; at 64 KiB and above a
#: section's own GET is already an efficient read, and a chunk's rewrite
#: costs about one GET per 64 KiB moved, as a cold read would anyway.
SMALL_SECTION_BYTES = 64 * 1024

_HEAD = struct.Struct("<II")  # sections, prefix bytes


def index_object(ledger_id: int) -> str:
    """The key of a ledger's index object (under its chunk objects' prefix)."""
    return f"ledgers/{ledger_id:020d}/index"


def small_sections(sections: Sequence[Section] | None, size: int) -> bool:
    """Whether a ledger of ``size`` bytes in ``sections`` is compacted into an index object."""
    return bool(sections) and size < SMALL_SECTION_BYTES * len(sections)


def _column(values: Iterable[int]) -> bytes:
    col = array("q", values)
    if sys.byteorder == "big":
        col.byteswap()
    return col.tobytes()


def encode_index(sections: Sequence[Section]) -> bytes:
    """The index object's bytes for ``sections`` (contiguous, entry order)."""
    keys = [s.key for s in sections]
    prefix = os.path.commonprefix(keys) if keys else ""
    suffixes = "\n".join(k[len(prefix):] for k in keys).encode()
    raw_prefix = prefix.encode()
    body = b"".join([
        _HEAD.pack(len(sections), len(raw_prefix)), raw_prefix,
        _column(s.first for s in sections), _column(s.count for s in sections),
        _column(s.offset for s in sections), _column(s.length for s in sections),
        suffixes,
    ])
    return bytes([INDEX_VERSION]) + zlib.compress(body, 6)


def decode_index(key: str, blob: bytes) -> list[Section]:
    """The sections in index object ``key`` (``blob``: its bytes).
    CorruptLedgerError if it is not version ``INDEX_VERSION`` or damaged."""
    if not blob or blob[0] != INDEX_VERSION:
        found = blob[0] if blob else "empty"
        raise CorruptLedgerError(f"ledger index object {key} is format {found}; this Magnetar reads format "
                                 f"{INDEX_VERSION} only")
    try:
        body = zlib.decompress(blob[1:])
        n, plen = _HEAD.unpack_from(body)
        at = _HEAD.size
        prefix = body[at:at + plen].decode()
        at += plen
        cols = []
        for _ in range(4):
            col = array("q")
            col.frombytes(body[at:at + 8 * n])
            if sys.byteorder == "big":
                col.byteswap()
            if len(col) != n:
                raise ValueError("short column")
            cols.append(col)
            at += 8 * n
        suffixes = body[at:].decode().split("\n") if n else []
        if len(suffixes) != n:
            raise ValueError(f"{len(suffixes)} keys for {n} sections")
    except (zlib.error, struct.error, ValueError) as exc:
        raise CorruptLedgerError(f"ledger index object {key} is damaged: {exc}") from exc
    firsts, counts, offsets, lengths = cols
    out = [new_section(firsts[i], counts[i], prefix + suffixes[i], offsets[i], lengths[i]) for i in range(n)]
    end = 0
    for s in out:
        if s.first != end:
            raise CorruptLedgerError(f"ledger index object {key} is damaged: entry {end} missing")
        end = s.end()
    return out


def spans(sections: Iterable[Section]) -> list[list[str]]:
    """Per session prefix (``data/<session>/``), the first and last commit
    object ``sections`` name, sorted."""
    bounds: dict[str, list[str]] = {}
    for s in sections:
        prefix = s.key.rpartition("/")[0]
        span = bounds.get(prefix)
        if span is None:
            bounds[prefix] = [s.key, s.key]
        elif s.key < span[0]:
            span[0] = s.key
        elif s.key > span[1]:
            span[1] = s.key
    return sorted(bounds.values())


def indexed_marker(entries: int, key: str, object_spans: list[list[str]]) -> bytes:
    """The ``compacted`` marker of a ledger compacted into index object ``key``."""
    return json.dumps({"entries": entries, "index": key, "spans": object_spans}, separators=(",", ":")).encode()


def marker_index(value: bytes) -> dict | None:
    """An indexed marker's fields (``index``, ``spans``); None for a chunk marker."""
    try:
        doc = json.loads(value)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("index"), str) else None


def spanned(keys: list[str], object_spans: Iterable[Sequence[str]]) -> set[str]:
    """Of ``keys`` (sorted), those inside any of ``object_spans`` (spans of
    one session prefix each). The spans are merged first: at 10,000 topics
    each of ~10,000 indexed ledgers spans most of the same ~70,000 commit
    objects, so walking each span's keys would be ~10^9 steps."""
    merged: list[list[str]] = []
    for first, last in sorted((a, b) for a, b in object_spans if b.startswith(a.rpartition("/")[0] + "/")):
        top = merged[-1] if merged else None
        # Same prefix and overlapping: keys between two keys of one prefix have that prefix.
        if top is not None and first <= top[1] and first.rpartition("/")[0] == top[0].rpartition("/")[0]:
            top[1] = max(top[1], last)
        else:
            merged.append([first, last])
    out: set[str] = set()
    for first, last in merged:
        out.update(keys[bisect_left(keys, first):bisect_right(keys, last)])
    return out
