"""Object ledgers filled together roll over apart: each ledger its writer
creates draws its own ``max_sections`` below the maximum
(``object_ledger.draw_max_sections``), so 10,000 topics written evenly no
longer ask for 10,000 rollovers (creates, seals, compactions) at once.
No I/O but an in-memory metadata store."""
from __future__ import annotations

import math
import random
from collections import Counter

import pytest

import magnetar.storage.object.object_ledger as object_ledger
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.objectstore.s3 import open_object_store
from magnetar.storage.object.index import Section
from magnetar.storage.object.object_backend import ObjectBackend
from magnetar.storage.object.object_ledger import ObjectLedger, draw_max_sections


@pytest.mark.parametrize("maximum", [10, 11, 50, 1000, 100_000])
def test_a_drawn_maximum_is_within_the_top_half_and_reaches_both_ends(maximum):
    rng = random.Random(7)
    drawn = [draw_max_sections(maximum, rng) for _ in range(20_000)]
    low = math.ceil(maximum / 2)
    assert min(drawn) >= low and max(drawn) <= maximum  # the open index stays bounded by the maximum
    if maximum <= 1000:
        assert min(drawn) == low and max(drawn) == maximum
    assert len(set(drawn)) >= min(maximum - low + 1, 5000)  # spread, not a few values


def test_no_spread_is_the_maximum_itself(monkeypatch):
    monkeypatch.setattr(object_ledger, "ROLLOVER_SPREAD", 0)
    assert {draw_max_sections(1000, random.Random(i)) for i in range(50)} == {1000}


def _section(first: int) -> Section:
    return Section(first, 1, "k", first, 10)


def test_a_ledger_is_nearly_full_and_full_at_its_own_points():
    ledger = ObjectLedger(1, 1, max_sections=7)  # prepared 3 (7 // 2) before full
    assert (ledger.max_sections, ledger.prepare_at) == (7, 4)
    seen = []
    for i in range(7):
        ledger._committed(_section(i))
        seen.append((ledger.nearly_full, ledger.full))
    assert seen.index((True, False)) == 3 and seen.index((True, True)) == 6
    big = ObjectLedger(2, 1, max_sections=640)
    assert big.prepare_at == 640 - object_ledger.PREPARE_AHEAD_SECTIONS


async def test_ledgers_created_together_get_different_thresholds_within_the_bounds():
    store = MemoryMetadataStore()
    objects = open_object_store("s3://bucket/p?endpoint=http://127.0.0.1:9")  # never asked: create writes no object
    backend = ObjectBackend(store, objects, layout=1, collect_interval_s=None, sections_per_ledger=100,
                            rng=random.Random(3))
    try:
        ledgers = [await backend.create(i) for i in range(1, 201)]
    finally:
        await objects.close()
    fulls = [ledger.max_sections for ledger in ledgers]
    assert all(50 <= n <= 100 for n in fulls)
    assert len(set(fulls)) >= 40  # before: every one at 100
    assert all(ledger.max_sections // 2 <= ledger.prepare_at < ledger.max_sections for ledger in ledgers)
    assert len({ledger.prepare_at for ledger in ledgers}) >= 20  # 25..50: prepared half of its own maximum ahead


def _rollovers_per_commit(ledgers: int, maximum: int, commits: int, seed: int) -> Counter:
    """10,000 topics written evenly, as the committer sees them: every
    commit adds a section to every open ledger; a full one is replaced by a
    new ledger (drawn as its backend draws). Returns commit -> rollovers."""
    rng = random.Random(seed)
    open_ = [ObjectLedger(i, 1, max_sections=draw_max_sections(maximum, rng)) for i in range(ledgers)]
    held = [0] * ledgers
    rolled: Counter = Counter()
    for commit in range(commits):
        for i, ledger in enumerate(open_):
            held[i] += 1
            if held[i] >= ledger.prepare_at:  # the commit path's test, then the ledger's own
                ledger.sections = range(held[i])  # only its length is read
                ledger.update_fullness()
            if ledger.full:
                rolled[commit] += 1
                open_[i] = ObjectLedger(i, 1, max_sections=draw_max_sections(maximum, rng))
                held[i] = 0
    return rolled


def test_ledgers_filled_together_roll_over_apart_generation_after_generation():
    rolled = _rollovers_per_commit(ledgers=10_000, maximum=100, commits=300, seed=11)
    assert sum(rolled.values()) >= 10_000 * 2  # every ledger rolled at least twice in 300 commits
    # Before: all 10,000 at commit 99, 199 and 299. Now over the top half of a
    # ledger's life: ~10,000 / 51 a commit in the first generation, fewer later.
    assert max(rolled.values()) <= 400
    assert not any(rolled[c] for c in range(49))  # none below half of the maximum
    assert all(rolled[c] for c in range(49, 300))  # and some at every commit from there on
