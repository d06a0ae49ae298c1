"""What one pass of the collector's commit-record sweep costs etcd and what
it writes (issue 41): at 10,000 topics a pass meets tens of thousands of
commit records, and every etcd call it makes competes with the commits'
own transactions. Real etcd; the records, ledger records and compacted
markers are written directly; calls counted through
magnetar_harness/read_tap.py."""
from __future__ import annotations

from magnetar.metadata import Put
from magnetar.storage.object.commit_records import COMMITS, decode_record, encode_record, record_key, sweep_records
from magnetar.storage.object.index import ROOT, compacted_key, ledger_key, new_section
from magnetar_harness.read_tap import ReadTap

WRITER = "w-sweep"


async def _ledgers(store, ids, compacted) -> None:
    writes = [Put(f"{ROOT}/{lid:020d}", b"{}") for lid in ids] + [Put(compacted_key(lid), b"{}") for lid in compacted]
    for i in range(0, len(writes), 100):
        await store.transaction([], writes[i:i + 100])


async def _record(store, seq: int, ids) -> None:
    okey = f"data/obj-{seq}"
    await store.put(record_key(WRITER, seq), encode_record(okey, [(lid, new_section(0, 1, okey, 10 * lid, 10))
                                                                   for lid in ids]))


async def _ledgers_of(store, seq: int) -> list[int] | None:
    record = await store.get(record_key(WRITER, seq))
    return None if record is None else [lid for lid, _ in decode_record(record.value)[1]]


async def test_a_pass_reads_pages_and_writes_in_shared_transactions(etcd_store):
    # 300 records naming one ledger each, every other ledger compacted.
    # One get per record, two per ledger and a delete per record was
    # ~1050 calls one after the other; then a few pages, one listing, the
    # markers (read together) and two transactions; now no marker read:
    # the listing of the ledgers' keys shows which have one (10,000 reads a
    # pass at 10,000 topics).
    ids = list(range(1, 301))
    await _ledgers(etcd_store, ids, ids[::2])
    for lid in ids:
        await _record(etcd_store, lid, [lid])
    tap = ReadTap(etcd_store)
    named = await sweep_records(tap)
    assert named == {f"data/obj-{lid}" for lid in ids[1::2]}
    assert sorted(int(n) for n in await etcd_store.children(f"{COMMITS}/{WRITER}")) == ids[1::2]
    record_reads = [k for k in tap.read_keys if k.startswith(COMMITS + "/")]
    assert len(record_reads) <= 4, record_reads  # pages, not a get per record
    assert [k for k in tap.read_keys if k.startswith(ROOT + "/") and not k.endswith("/compacted")] == []
    assert len(tap.read_keys) <= 8, tap.read_keys  # no marker read, no ledger record get
    assert [w[0] for w in tap.writes] == ["transaction", "transaction"], tap.writes  # 150 deletes
    # A second pass finds nothing to write.
    tap = ReadTap(etcd_store)
    await sweep_records(tap)
    assert tap.writes == []


async def test_a_record_is_rewritten_only_when_it_halves_and_deleted_when_empty(etcd_store):
    await _ledgers(etcd_store, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], [1, 5, 6, 9])  # 11, 12: deleted (no record)
    await _record(etcd_store, 1, [1, 2, 3, 4])  # loses 1 of 4: left alone
    await _record(etcd_store, 2, [5, 6, 7, 8])  # loses 2 of 4: rewritten
    await _record(etcd_store, 3, [9, 11])  # loses both: deleted
    await _record(etcd_store, 4, [12])  # a deleted ledger only: deleted
    versions = {seq: (await etcd_store.get(record_key(WRITER, seq))).version for seq in (1, 2)}
    tap = ReadTap(etcd_store)  # one store across passes, as a broker's collector has
    named = await sweep_records(tap)
    assert named == {"data/obj-1", "data/obj-2"}
    assert await _ledgers_of(etcd_store, 1) == [1, 2, 3, 4]
    assert (await etcd_store.get(record_key(WRITER, 1))).version == versions[1]  # not rewritten
    assert await _ledgers_of(etcd_store, 2) == [7, 8]
    assert await _ledgers_of(etcd_store, 3) is None and await _ledgers_of(etcd_store, 4) is None
    # The next pass: the same, and no marker read (the listing shows them).
    tap.read_keys = []
    assert await sweep_records(tap) == {"data/obj-1", "data/obj-2"}
    assert [k for k in tap.read_keys if k.endswith("/compacted")] == []
    assert tap.writes[-1][0] == "transaction"  # the first pass's rewrite and deletes, in one
    assert len(tap.writes) == 1


class _MovesARecord(ReadTap):
    """Changes ``key`` just before the sweep's first transaction, as another
    collector or a concurrent rewrite would between its read and its write."""

    def __init__(self, inner, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.moved = False

    async def transaction(self, compares, writes, *, versions=True):
        if not self.moved and any(w.key == self.key for w in writes):
            self.moved = True
            await self.inner.put(self.key, encode_record("data/obj-moved", [(1, new_section(0, 1, "data/obj-moved", 0, 1))]))
        return await super().transaction(compares, writes, versions=versions)


async def test_a_record_changed_meanwhile_is_left_alone_and_the_others_still_written(etcd_store):
    ids = list(range(1, 11))
    await _ledgers(etcd_store, ids, ids)  # all compacted: every record goes
    for lid in ids:
        await _record(etcd_store, lid, [lid])
    tap = _MovesARecord(etcd_store, record_key(WRITER, 4))
    named = await sweep_records(tap)
    assert tap.moved
    assert "data/obj-4" in named  # not known to be gone: its object stays
    assert sorted(int(n) for n in await etcd_store.children(f"{COMMITS}/{WRITER}")) == [4]
    record = await etcd_store.get(record_key(WRITER, 4))
    assert decode_record(record.value)[0] == "data/obj-moved"
    assert [w[0] for w in tap.writes] == ["transaction", "transaction"]  # the failed one, then the rest


class _CreatesALedgerAfterTheListing(ReadTap):
    """Creates ledger 999 and a record naming it (after the pages read so
    far) just after the sweep's first listing of the ledgers."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.listings = 0

    async def keys_below(self, key):
        keys = await super().keys_below(key)
        if key == ROOT:
            self.listings += 1
            if self.listings == 1:
                await _ledgers(self.inner, [999], [])
                await _record(self.inner, 500, [999])
        return keys


async def test_a_ledger_newer_than_the_listing_is_not_taken_for_deleted(etcd_store):
    # 100 records: more than the first page, which has the ledgers listed.
    await _ledgers(etcd_store, [1], [])
    for seq in range(100):
        await _record(etcd_store, seq, [1])
    tap = _CreatesALedgerAfterTheListing(etcd_store)
    named = await sweep_records(tap)
    assert tap.listings == 1
    assert ledger_key(999) in tap.read_keys  # missing from the listing: its record read, found
    assert await _ledgers_of(etcd_store, 500) == [999] and "data/obj-500" in named
    assert tap.writes == []


class _ListsWithout(ReadTap):
    """Lists ``/object-ledgers`` without ledger ``lid``: a listing that
    does not show a ledger the records read before it name (a store whose
    listing lags its reads)."""

    def __init__(self, inner, lid: int) -> None:
        super().__init__(inner)
        self.hidden = f"{lid:020d}"

    async def keys_below(self, key):
        keys = await super().keys_below(key)
        return [k for k in keys if k.partition("/")[0] != self.hidden] if key == ROOT else keys


async def test_a_ledger_missing_from_the_listing_is_dead_only_once_its_record_is_read_gone(etcd_store):
    # 4b3221d took a ledger missing from a listing taken after the page
    # naming it for deleted: right only while the listing shows every
    # ledger that existed when the page was read. The proof now is a read
    # of the ledger's record (the listing only spares reads).
    await _ledgers(etcd_store, [1, 999], [])
    await _record(etcd_store, 0, [999])
    for seq in range(1, 100):
        await _record(etcd_store, seq, [1])
    tap = _ListsWithout(etcd_store, 999)
    named = await sweep_records(tap)
    assert await _ledgers_of(etcd_store, 0) == [999] and "data/obj-0" in named  # 4b3221d: deleted, unnamed
    assert ledger_key(999) in tap.read_keys and tap.writes == []
    # Deleted since: its record read, found gone; the commit record goes.
    await etcd_store.delete(ledger_key(999))
    assert "data/obj-0" not in await sweep_records(_ListsWithout(etcd_store, 999))
    assert await _ledgers_of(etcd_store, 0) is None


async def test_a_collection_lists_the_ledgers_keys_once_not_each_ledgers_section_records(etcd_store, objects):
    # A listing of each ledger's s/ keys was one etcd call per ledger and
    # pass (10,000s at 10,000 topics); one keys-only listing says which
    # ledgers have section records (format 1) at all.
    from magnetar.storage.object.compactor import collect_orphans
    from magnetar.storage.object.index import Section, section_key

    ids = list(range(1, 51))
    await _ledgers(etcd_store, ids, ids[::2])
    await etcd_store.put(section_key(8, 0), Section(0, 1, "data/f1/0000000000000-00000001", 0, 10).encode())
    await objects.put("data/f1/0000000000000-00000001", b"a format-1 ledger's section")
    tap = ReadTap(etcd_store)
    assert await collect_orphans(tap, objects) == []  # named by ledger 8's section record
    assert [k for k in tap.read_keys if k.endswith("/s")] == [f"{ROOT}/{8:020d}/s"]


async def test_a_collection_reads_the_markers_of_indexed_ledgers_only(etcd_store, objects):
    # An indexed ledger's marker names the commit objects it spans; a chunked
    # one's names none. The listing after the sweep tells them apart (chunk
    # records), so only the indexed ledgers' markers are read: every
    # ledger's was 10,000 reads a pass at 10,000 topics.
    from magnetar.storage.object.compactor import collect_orphans
    from magnetar.storage.object.index import chunk_key

    ids = list(range(1, 41))
    await _ledgers(etcd_store, ids, ids[:22])  # 1-22 compacted, 23-40 open
    for lid in ids[:20]:  # 1-20 chunked: a chunk record beside the marker; 21, 22 indexed
        await etcd_store.put(chunk_key(lid, 0), b"{}")
    tap = ReadTap(etcd_store)
    assert await collect_orphans(tap, objects) == []
    assert sorted(k for k in tap.read_keys if k.endswith("/compacted")) == [compacted_key(21), compacted_key(22)]


async def test_a_record_of_a_young_object_is_left_undecoded_until_it_is_old(etcd_store):
    """The collector's pass leaves a record whose object is younger than its
    age bound as it is, rows undecoded, and names its object; older, it is
    released as before. At 10,000 written topics nearly every record is that
    young, and decoding them all held the broker's loop (issue 41)."""
    from magnetar.storage.object.commit_records import young_object
    from magnetar.storage.object.index import commit_object

    now_ms = 1_800_000_000_000
    await _ledgers(etcd_store, [1, 2, 3], [1, 2, 3])  # all compacted: every record could go
    old_key = commit_object("w", now_ms - 700_000, 1)
    young_key = commit_object("w", now_ms - 5_000, 2)
    for seq, okey in ((1, old_key), (2, young_key)):
        await etcd_store.put(record_key(WRITER, seq), encode_record(okey, [(seq, new_section(0, 1, okey, 0, 1))]))
    await _record(etcd_store, 3, [3])  # an object key with no time: decoded, as before
    sweep = await sweep_records(etcd_store, young_s=600, now=now_ms / 1000)
    assert sweep == {young_key}
    assert await _ledgers_of(etcd_store, 1) is None and await _ledgers_of(etcd_store, 3) is None
    assert await _ledgers_of(etcd_store, 2) == [2]  # young: left as it is
    # Ten minutes on it is old enough, and goes.
    assert await sweep_records(etcd_store, young_s=600, now=now_ms / 1000 + 600) == set()
    assert await etcd_store.children(f"{COMMITS}/{WRITER}") == []
    # The head is read as encode_rows writes it; anything else is decoded.
    assert young_object(b'{"o":"%s","s":[]}' % young_key.encode(), now_ms - 600_000) == young_key
    assert young_object(b'{"o":"%s","s":[]}' % old_key.encode(), now_ms - 600_000) is None
    assert young_object(b'{"s":[],"o":"%s"}' % young_key.encode(), now_ms - 600_000) is None
    assert young_object(b'{"o":"data/a\\"b","s":[]}', 0) is None
    assert young_object(b'{"o":"', 0) is None
