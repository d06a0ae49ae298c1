"""What one rollover writes to etcd on the object backend, at steady state
(issue 41): at 10,000 topics ledgers roll over ~40 times a second and every
rollover's etcd writes come on top of the commits' own transactions. Real
etcd, real SeaweedFS, the storage layer alone, through a counting wrapper
(magnetar_harness/read_tap.py). The sealed ledger's compaction (its index
records, a transaction) and the commits' own are left out: neither is the
rollover's."""
from __future__ import annotations

import asyncio

from magnetar.metadata import MetadataError

from magnetar.objectstore.s3 import open_object_store
from magnetar.storage import ManagedLedgerFactory, StorageConfig, StorageError
from magnetar.storage.cache import CacheBudget
from magnetar.storage.ledger_meta import LEDGER_ID_COUNTER, ROOT
from magnetar.storage.object import object_ledger
from magnetar.storage.object.index import ROOT as LEDGERS
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar_harness.read_tap import ReadTap
from tests.helpers import wait_until

TOPICS = 4
WARM_ROLLOVERS = 8  # per topic: blocks of ids have grown by then
MEASURED_ROLLOVERS = 10  # per topic


def _ledger_count(ml) -> int:
    return sum(1 for _ in ml._ledgers)


async def _append_until(ml, rollovers: int) -> None:
    """Append one entry at a time (one section per commit) until ``ml`` has
    rolled over ``rollovers`` more times (no retention: its ledgers stay)."""
    target = _ledger_count(ml) + rollovers
    for _ in range(rollovers * 20):
        if _ledger_count(ml) >= target:
            return
        await ml.append(b"x" * 64)
    raise AssertionError(f"{ml.name}: {rollovers} rollovers did not happen in {rollovers * 20} appends")


def _rolling_every_4(etcd_store, objects_url, tmp_path, monkeypatch):
    """(the counting store, the backend, the factory): ledgers full at 4
    sections (prepared ahead at 2), no spread, no collector."""
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 4)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)
    store = ReadTap(etcd_store)
    cfg = StorageConfig()
    budget = CacheBudget(cfg.cache_budget_bytes)
    backend = ObjectBackend(store, open_object_store(objects_url), profile="latency", cache_budget=budget,
                            collect_interval_s=None)
    return store, backend, ManagedLedgerFactory(tmp_path / "unused", store, cfg, backend=backend,
                                                cache_budget=budget)


async def test_a_rollover_at_steady_state_makes_two_etcd_writes(
        tmp_path, etcd_store, objects_url, monkeypatch):
    store, backend, factory = _rolling_every_4(etcd_store, objects_url, tmp_path, monkeypatch)
    mls = [await factory.open(f"t/roll-{i}") for i in range(TOPICS)]
    await asyncio.gather(*(_append_until(ml, WARM_ROLLOVERS) for ml in mls))
    before = len(store.writes)
    counts_before = [_ledger_count(ml) for ml in mls]
    await asyncio.gather(*(_append_until(ml, MEASURED_ROLLOVERS) for ml in mls))
    rollovers = sum(_ledger_count(ml) - n for ml, n in zip(mls, counts_before))
    writes = store.writes[before:]
    increments = [w for w in writes if w[0] == "increment" and w[1] == LEDGER_ID_COUNTER]
    ml_keys = {f"{ROOT}/{ml.name}" for ml in mls}
    record_puts = [w for w in writes if w[0] == "put" and w[1] in ml_keys]
    ledger_creates = [w for w in writes if w[0] == "put" and w[1] not in ml_keys]
    prepares = [w for w in writes if w[0] == "transaction" and len(w[1]) == 2 and w[1][0] in ml_keys
                and w[1][1].startswith(LEDGERS)]
    # Per rollover: one transaction writes the record naming the next ledger
    # prepared and creates that ledger's record (before: two writes, the
    # record's compare-and-set, then the ledger's create); then the record
    # names it open (and the old one closed).
    assert len(prepares) == rollovers, prepares
    assert ledger_creates == []
    assert len(record_puts) == rollovers, record_puts
    # Ids come in blocks: an increment (two etcd round trips) per many
    # rollovers, not one per rollover as before.
    assert len(increments) * 2 <= rollovers / 4, (len(increments), rollovers)
    etcd_calls = len(prepares) + len(record_puts) + 2 * len(increments)
    assert etcd_calls / rollovers < 2.5, (etcd_calls, rollovers)  # before: 5
    await factory.close()


class UnknownOutcome(ReadTap):
    """Real etcd; the first transaction that creates a ledger beside the
    managed ledger's record is applied, then reported failed (an etcd
    unreachable after the write: the outcome unknown to the broker)."""

    def __init__(self, inner) -> None:
        super().__init__(inner)
        self.lost: str | None = None

    async def transaction(self, compares, writes, *, versions=True):
        versions_ = await super().transaction(compares, writes, versions=versions)
        keys = [w.key for w in writes]
        if self.lost is None and len(keys) == 2 and keys[0].startswith(ROOT) and keys[1].startswith(LEDGERS):
            self.lost = keys[1]
            raise MetadataError("etcd unreachable (test), after the write")
        return versions_


async def test_a_prepare_of_unknown_outcome_leaves_the_ledger_to_the_next_owner(
        tmp_path, etcd_store, objects_url, monkeypatch):
    """Whether the ledger exists is unknown, so the id stays named as
    prepared; the record moved on without this owner knowing its version,
    so it fences itself (as after any record write of unknown outcome) and
    the next owner's recovery deletes the ledger."""
    monkeypatch.setattr(object_ledger, "MAX_SECTIONS_PER_LEDGER", 4)
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)
    store = UnknownOutcome(etcd_store)

    def factory() -> ManagedLedgerFactory:
        cfg = StorageConfig()
        budget = CacheBudget(cfg.cache_budget_bytes)
        backend = ObjectBackend(store, open_object_store(objects_url), profile="latency", cache_budget=budget,
                                collect_interval_s=None)
        return ManagedLedgerFactory(tmp_path / "unused", store, cfg, backend=backend, cache_budget=budget)

    first = factory()
    ml = await first.open("t/unknown")
    for _ in range(40):
        if store.lost is not None:
            break
        try:
            await ml.append(b"x")
        except StorageError:
            break  # fenced already (below)
    assert store.lost is not None
    lost_id = int(store.lost.rsplit("/", 1)[1])
    assert lost_id in ml._record.prepared  # still named: it may exist (it does)
    await wait_until(lambda: ml.state == "fenced", what="the owner fenced by its record's unknown version")
    await first.close()
    second = factory()
    reopened = await second.open("t/unknown")
    assert lost_id in reopened.swept_at_open
    assert await etcd_store.get(store.lost) is None
    await second.close()


async def test_a_ledger_compacted_from_its_writers_kept_bytes_reads_nothing_from_etcd(
        tmp_path, etcd_store, objects_url, monkeypatch):
    """A writer's own sealed ledger (every commit of it successful, the
    record still at its epoch) is compacted from the bytes it kept with no
    etcd read: its writes compare the record's version and the marker's
    absence instead. At 10,000 topics ~30 ledgers are compacted a second,
    and the two gets each were a tenth of a compaction's time on the loop."""
    from magnetar.storage.object.index import compacted_key, ledger_key

    store, backend, factory = _rolling_every_4(etcd_store, objects_url, tmp_path, monkeypatch)
    mls = [await factory.open(f"t/kept-{i}") for i in range(TOPICS)]
    written = {ml.name: [] for ml in mls}

    async def write(ml, n: int) -> None:
        for i in range(n):
            written[ml.name].append(f"{ml.name}/{i}".encode())
            await ml.append(written[ml.name][-1])

    await asyncio.gather(*(write(ml, 14) for ml in mls))  # 3 rollovers each at 4 sections
    compactions = backend.compactions
    await wait_until(lambda: compactions.compacted["kept"] >= 3 * TOPICS and not compactions.running,
                     what="every sealed ledger compacted from its kept bytes")
    assert compactions.compacted == {"kept": 3 * TOPICS, "indexed": 0, "store": 0, "copied": 0}
    sealed = [lid for ml in mls for lid in list(ml._ledgers.metas)[:-1]]
    assert len(sealed) == 3 * TOPICS
    for lid in sealed:
        assert await etcd_store.get(compacted_key(lid)) is not None
    touched = {ledger_key(lid) for lid in sealed} | {compacted_key(lid) for lid in sealed}
    assert [k for k in store.read_keys if k in touched] == []  # before: a get of each, per compaction
    for ml in mls:  # read back from the chunks
        entries = await ml.read_entries(ml.first_position(), 100)
        assert [e.data for e in entries] == written[ml.name]
    await factory.close()
