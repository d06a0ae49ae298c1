"""Where the object backend's ledgers are recorded in the metadata store.

Layout (JSON values):

- ``/object-ledgers/<id:020d>``: the ledger record,
  ``{"state": "open"|"fenced", "writer": <session>}``. Its *version* is the
  ledger's epoch: 0 when its writer created it; a new owner's fence bumps
  it with compare-and-set. Every commit compares it, so a fenced writer
  (a zombie) can never record an entry again.
- ``/object-ledgers/<id:020d>/s/<first entry id:012d>``: one *section*
  as committed, ``{"o": object key, "off": byte offset, "len": bytes,
  "n": entries}``: entries ``first .. first+n-1`` are framed
  (``ledger.HEADER`` + data, CRC32C) in bytes ``[off, off+len)`` of the
  object. A ledger's sections are contiguous from entry 0.
- ``/object-ledgers/<id:020d>/c/<first:012d>``: the same for the chunks of
  a compacted ledger, and ``/object-ledgers/<id:020d>/compacted`` once all
  of them are recorded: from then on readers use ``c/`` and ignore ``s/``
  (whose records the compactor deletes next).

Objects (keys under the object store's prefix):
``data/<session>/<unix ms:013d>-<seq:08d>``, one per commit, holding
sections of many ledgers (the time lets the collector leave young objects
alone); ``ledgers/<id:020d>/<first:012d>``, a compacted ledger's chunks;
``ledgers/<id:020d>/index``, the section list of a ledger compacted
without moving its data (:mod:`.ledger_index`: its marker names it).
No I/O here.
"""
from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, NamedTuple

from ...formats import check_format
from ..untracked import untrack_atoms, untrack_atoms_python  # noqa: F401 (the twin: tests name it here)

if TYPE_CHECKING:
    from ...metadata.store import MetadataStore

ROOT = "/object-ledgers"


def ledger_key(ledger_id: int) -> str:
    return f"{ROOT}/{ledger_id:020d}"


def section_key(ledger_id: int, first: int) -> str:
    return f"{ROOT}/{ledger_id:020d}/s/{first:012d}"


def chunk_key(ledger_id: int, first: int) -> str:
    return f"{ROOT}/{ledger_id:020d}/c/{first:012d}"


def compacted_key(ledger_id: int) -> str:
    return f"{ROOT}/{ledger_id:020d}/compacted"


def chunk_object(ledger_id: int, first: int) -> str:
    return f"ledgers/{ledger_id:020d}/{first:012d}"


def chunk_object_ledger(key: str) -> int | None:
    """The ledger id of a chunk object's key; None if not one."""
    parts = key.split("/")
    return int(parts[1]) if len(parts) == 3 and parts[0] == "ledgers" and parts[1].isdigit() else None


def commit_object(session: str, unix_ms: int, seq: int) -> str:
    return f"data/{session}/{unix_ms:013d}-{seq:08d}"


def commit_object_time_ms(key: str) -> int | None:
    """When a commit object was written (from its key); None if not one."""
    name = key.rsplit("/", 1)[-1]
    stamp, dash, _ = name.partition("-")
    return int(stamp) if dash and stamp.isdigit() else None


#: The newest object layout this code reads and writes, named by each
#: ledger's record (``format``; none: 1). Format 1: the fence is the ledger
#: record, the index a record per section (above). Format 2: the record
#: also says ``"from"``, the first commit record of its writer that may
#: hold it; the fence is its writer's key (:mod:`.writer_fence`), the index
#: its writer's commit records (:mod:`.commit_records`); chunks and the
#: ``compacted`` marker as in format 1.
LAYOUT_FORMAT = 2


def ledger_record(state: str, writer: str, *, layout: int = 1, since: int | None = None,
                  fenced_by: str | None = None) -> bytes:
    doc: dict = {"format": layout, "state": state, "writer": writer}
    if since is not None:
        doc["from"] = since
    if fenced_by is not None:
        doc["fenced_by"] = fenced_by
    return json.dumps(doc, separators=(",", ":")).encode()


def ledger_layout(value: bytes) -> tuple[int, dict]:
    """A ledger record's layout format and its fields (after :func:`check_ledger_record`)."""
    try:
        doc = json.loads(value)
    except ValueError:
        return 1, {}
    if not isinstance(doc, dict):
        return 1, {}
    return int(doc.get("format", 1)), doc


def check_ledger_record(key: str, value: bytes) -> None:
    """NewerFormatError if the ledger at ``key`` was laid out by a newer Magnetar."""
    try:
        doc = json.loads(value)
    except ValueError:
        return  # unreadable: the layout's own checks say so
    check_format("object-store ledger", key, doc.get("format", 1) if isinstance(doc, dict) else 1, LAYOUT_FORMAT)


class Section(NamedTuple):
    """Entries ``first .. first + count - 1`` of a ledger, framed in
    ``[offset, offset + length)`` of object ``key``. A named tuple, not a
    frozen dataclass: a commit at 10,000 written topics makes one per
    ledger, and a frozen dataclass's ``__init__`` cost seven times as much."""

    first: int
    count: int
    key: str
    offset: int
    length: int

    def end(self) -> int:
        """Entry id just past the section."""
        return self.first + self.count

    def encode(self) -> bytes:
        return json.dumps({"o": self.key, "off": self.offset, "len": self.length, "n": self.count},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, first: int, value: bytes) -> "Section":
        doc = json.loads(value)
        return new_section(first, int(doc["n"]), str(doc["o"]), int(doc["off"]), int(doc["len"]))


def new_section(first: int, count: int, key: str, offset: int, length: int) -> Section:
    """A ``Section`` the cyclic collector does not walk (compiled twin only).

    An open ledger keeps every section until it rolls over, and a commit at
    10,000 written topics makes one per ledger, 20,000 a second: as tracked
    objects they made each middle-generation collection walk hundreds of
    thousands of them, 114-177 ms pauses that set the p99. A section holds
    only ints and a str, so it can never be part of a cycle; untracking it
    changes nothing else (reference counting still frees it)."""
    return untrack_atoms(Section(first, count, key, offset, length))


def contiguous(sections: list[Section]) -> list[Section]:
    """The sections that follow on from entry 0 without a gap (sorted input)."""
    out: list[Section] = []
    end = 0
    for s in sections:
        if s.first != end:
            break
        out.append(s)
        end = s.end()
    return out


async def read_sections(store: "MetadataStore", ledger_id: int, kind: str = "s") -> list[Section]:
    """The ledger's records under ``kind`` (``s``: sections, ``c``: chunks)
    as the store holds them now, in entry order (MetadataError from the store)."""
    base = f"{ledger_key(ledger_id)}/{kind}"
    names = await store.children(base)
    records = await asyncio.gather(*(store.get(f"{base}/{name}") for name in names))
    return sorted((Section.decode(int(n), r.value) for n, r in zip(names, records) if r is not None),
                  key=lambda s: s.first)


#: Writes per metadata transaction when a ledger's records are rewritten or
#: deleted in bulk (etcd caps a transaction at 128 operations).
WRITES_PER_TRANSACTION = 100


async def write_in_chunks(store: "MetadataStore", compares: list, writes: list) -> None:
    """``writes`` in transactions of at most WRITES_PER_TRANSACTION, each
    under all of ``compares`` (TransactionFailed and MetadataError from the store)."""
    for i in range(0, len(writes), WRITES_PER_TRANSACTION):
        await store.transaction(compares, writes[i:i + WRITES_PER_TRANSACTION])
