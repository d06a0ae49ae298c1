"""The small data structures: position ranges and the tail cache."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.storage import Position
from magnetar.storage.cache import CacheBudget, TailCache
from magnetar.storage.ranges import PositionRangeSet

positions = st.builds(Position, st.integers(1, 3), st.integers(0, 30))


@given(st.lists(positions, max_size=60), positions)
def test_range_set_matches_a_set(added, cut):
    ranges = PositionRangeSet()
    model: set[Position] = set()
    for pos in added:
        assert ranges.add(pos) == (pos not in model)
        model.add(pos)
    assert len(ranges) == len(model)
    assert all((p in ranges) == (p in model) for p in map(Position, [1, 2, 3] * 31, sorted(range(31)) * 3))
    pairs = ranges.ranges()
    assert pairs == sorted(pairs)
    for (a, b), (c, _) in zip(pairs, pairs[1:]):
        assert b < c and not (a.ledger_id == c.ledger_id and b.entry_id + 1 == c.entry_id)  # merged
    for first, last in pairs:
        assert ranges.run_end(first) == last
    ranges.remove_through(cut)
    model = {p for p in model if p > cut}
    assert len(ranges) == len(model)
    assert {Position(l, e) for l, s, t in ranges.runs() for e in range(s, t + 1)} == model


def test_range_set_runs():
    ranges = PositionRangeSet()
    assert ranges.add_run(1, 5, 9) == 5
    assert ranges.add_run(1, 0, 3) == 4
    assert ranges.add_run(1, 2, 6) == 1  # bridges both runs
    assert ranges.ranges() == [(Position(1, 0), Position(1, 9))]
    assert ranges.count_in_ledger(1) == 10 and ranges.count_in_ledger(2) == 0


def test_tail_cache_evicts_oldest_and_truncates():
    cache = TailCache(max_bytes=10)
    cache.put_many(1, 0, [b"aaa", b"bbb"])
    cache.put_many(2, 0, [b"ccc", b"ddd"])  # 12 bytes: evicts 1:0
    assert cache.bytes == 9
    assert cache.get(1, 0, 1) == []
    assert cache.get(1, 1, 5) == [b"bbb"]
    assert cache.first_cached(1) == 1
    assert cache.get(2, 0, 1) == [b"ccc", b"ddd"]
    cache.put_many(2, 2, [b"eeeeeeeeee"])  # bigger than everything else together
    assert cache.get(1, 1, 1) == [] and cache.get(2, 0, 0) == []
    assert cache.get(2, 2, 2) == [b"eeeeeeeeee"]
    cache.put_many(2, 3, [b"f"])
    cache.truncate(2, 3)
    assert cache.get(2, 3, 3) == []
    cache.put_many(2, 3, [b"g"])  # appends continue after a truncate
    assert cache.get(2, 3, 3) == [b"g"]
    cache.put_many(2, 9, [b"h"])  # a gap restarts the run
    assert cache.get(2, 3, 3) == [] and cache.get(2, 9, 9) == [b"h"]
    cache.drop(2)
    assert cache.bytes == 0


def test_disabled_cache():
    cache = TailCache(0)
    cache.put_many(1, 0, [b"x"])
    assert cache.get(1, 0, 0) == [] and cache.bytes == 0


def test_tail_cache_evicts_in_chunks_down_to_its_size():
    """Past an eighth over its size the cache drops the oldest entries down to
    its size at once, so the next puts do not each evict one."""
    cache = TailCache(max_bytes=800)
    for i in range(9):
        cache.put_many(1, i, [bytes(100)])
    assert cache.bytes == 900 and cache.first_cached(1) == 0  # an eighth over: not yet
    cache.put_many(1, 9, [bytes(100)])
    assert cache.bytes == 800 and cache.first_cached(1) == 2
    cache.put_many(1, 10, [bytes(100)])
    assert cache.bytes == 900 and cache.first_cached(1) == 2  # no eviction for this one


@settings(max_examples=200)
@given(puts=st.lists(st.tuples(st.integers(0, 2), st.lists(st.integers(1, 300), min_size=1, max_size=20)),
                     max_size=40),
       size=st.integers(1, 2000))
def test_tail_cache_keeps_a_suffix_of_each_run_within_bounds(puts, size):
    cache = TailCache(max_bytes=size)
    written: dict[int, list[bytes]] = {}
    for ledger, sizes in puts:
        datas = [bytes([len(written.get(ledger, [])) % 256]) * n for n in sizes]
        cache.put_many(ledger, len(written.get(ledger, [])), datas)
        written.setdefault(ledger, []).extend(datas)
        held = 0
        for lid, entries in written.items():
            first = cache.first_cached(lid)
            if first is None:
                continue
            cached = cache.get(lid, first, len(entries))
            assert cached == entries[first:], "a run is the newest entries, contiguous"
            held += sum(map(len, cached))
        assert held == cache.bytes
        assert cache.bytes <= size + size // 8


def test_caches_sharing_a_budget_give_up_the_least_recently_written_first():
    """A broker with many topics: each cache is bounded, and so is their sum.
    Past the budget the oldest entries of the caches written to least
    recently go first; the one being written keeps its newest entries."""
    budget = CacheBudget(max_bytes=1000)
    a, b, c = (TailCache(800, budget) for _ in range(3))
    a.put_many(1, 0, [bytes(100)] * 4)  # 400
    b.put_many(2, 0, [bytes(100)] * 4)  # 800
    a.put_many(1, 4, [bytes(100)])      # 900: a is now the most recent
    c.put_many(3, 0, [bytes(100)] * 3)  # 1200: over by more than an eighth
    assert (a.bytes, b.bytes, c.bytes) == (500, 200, 300) and budget.bytes == 1000
    assert b.first_cached(2) == 2 and a.get(1, 0, 4) == [bytes(100)] * 5
    c.put_many(3, 3, [bytes(100)] * 9)  # c keeps its own 800; b goes, then a's oldest
    assert (a.bytes, b.bytes, c.bytes) == (200, 0, 800) and budget.bytes == 1000
    assert b.first_cached(2) is None and a.first_cached(1) == 3 and c.first_cached(3) == 4
    c.clear()
    assert budget.bytes == 200


@settings(max_examples=200)
@given(puts=st.lists(st.tuples(st.integers(0, 4), st.lists(st.integers(1, 300), min_size=1, max_size=10)),
                     max_size=60),
       size=st.integers(1, 1500), budget_size=st.integers(0, 3000))
def test_caches_under_a_budget_keep_suffixes_and_the_budget_holds(puts, size, budget_size):
    budget = CacheBudget(budget_size)
    caches = [TailCache(size, budget) for _ in range(5)]
    written: dict[int, list[bytes]] = {}
    for i, sizes in puts:
        entries = written.setdefault(i, [])
        datas = [bytes([len(entries) % 256]) * n for n in sizes]
        caches[i].put_many(7, len(entries), datas)
        entries.extend(datas)
        for j, cache in enumerate(caches):
            first = cache.first_cached(7)
            if first is not None:
                assert cache.get(7, first, len(written[j])) == written[j][first:]
            assert cache.bytes <= size + size // 8
        assert budget.bytes == sum(c.bytes for c in caches)
        if budget_size:
            assert budget.bytes <= budget_size + budget_size // 8
