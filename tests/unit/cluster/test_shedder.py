"""The shedder's plan: when to move which bundle where."""
from __future__ import annotations

from magnetar.broker.cluster.shedder import plan


def test_an_even_cluster_moves_nothing():
    assert plan({"a": 100, "b": 90, "c": 95}, {"a": {"x": 50, "y": 50}}, threshold=0.3) is None


def test_the_bundle_nearest_half_the_gap_goes_from_the_busiest_to_the_idlest():
    move = plan({"a": 1000, "b": 100, "c": 400},
                {"a": {"x": 700, "y": 300, "z": 100}, "b": {"w": 100}}, threshold=0.3)
    assert (move.bundle, move.source, move.destination) == ("y", "a", "b")  # gap 900: 300 is nearest 450


def test_never_a_brokers_last_bundle_and_never_a_cooling_broker():
    assert plan({"a": 1000, "b": 0}, {"a": {"x": 1000}}, threshold=0.3) is None
    assert plan({"a": 1000, "b": 0, "c": 0}, {"a": {"x": 500, "y": 500}}, threshold=0.3,
                cooling={"a"}) is None


def test_a_bundle_hotter_than_the_gap_stays_so_two_brokers_do_not_swap_it():
    assert plan({"a": 1000, "b": 700}, {"a": {"x": 900, "y": 100}}, threshold=0.2).bundle == "y"
    assert plan({"a": 1000, "b": 700}, {"a": {"x": 950, "y": 50}}, threshold=0.2) is None  # helps too little
    assert plan({"a": 1000, "b": 600}, {"a": {"x": 1000}, "c": {}}, threshold=0.2) is None


def test_equal_bundles_settle_and_the_shedder_stops():
    """Four equal bundles on three brokers: 4-0-0 -> 3-1-0 -> 2-1-1, then no move."""
    owned = {"a": {"w": 100, "x": 100, "y": 100, "z": 100}, "b": {}, "c": {}}
    moves = 0
    while True:
        loads = {b: sum(r.values()) for b, r in owned.items()}
        move = plan(loads, owned, threshold=0.3)
        if move is None:
            break
        owned[move.destination][move.bundle] = owned[move.source].pop(move.bundle)
        moves += 1
        assert moves <= 3, "the shedder does not settle"
    assert sorted(len(r) for r in owned.values()) == [1, 1, 2]
