"""The perf tool's pure parts: planning, pacing, stamps, histograms."""
from __future__ import annotations

import time

import pytest

from magnetar.perf import latency
from magnetar.perf.pacing import Pacer
from magnetar.perf.payload import Stamper, stamp_of
from magnetar.perf.spec import WorkloadSpec, plan_workers


def test_plan_splits_producers_rate_and_messages():
    spec = WorkloadSpec(topics=2, producers=3, rate=6000, messages=601, producer_workers=2, consumers=0,
                        subscriptions=[])
    prods, cons = plan_workers(spec.validate())
    assert cons == []
    assert sorted(len(p.slots) for p in prods) == [3, 3]
    assert sum(p.rate for p in prods) == pytest.approx(6000)
    assert sum(p.messages for p in prods) == 601


def test_plan_fan_out_gives_every_subscription_a_consumer():
    spec = WorkloadSpec(subscriptions=["a", "b", "c", "d"]).validate()
    _, cons = plan_workers(spec)
    assert sorted(s for plan in cons for _, s in plan.slots) == ["a", "b", "c", "d"]


@pytest.mark.parametrize("change, message", [
    ({"partitions": 3}, "partitioned"),
    ({"subscription_type": "Key_Shared"}, "subscription-type"),
    ({"consumers": 2}, "Exclusive"),
    ({"duration": 0, "messages": 0}, "--duration"),
])
def test_validate_refuses(change, message):
    with pytest.raises(ValueError, match=message):
        WorkloadSpec(**change).validate()


def test_pacer_keeps_the_average_and_caps_bursts():
    pacer = Pacer(1000, start=100.0, max_burst=50)
    assert pacer.due(0, now=100.0) == 0
    assert pacer.due(0, now=100.01) == 10
    assert pacer.due(10, now=100.01) == 0
    assert pacer.due(0, now=105.0) == 50  # a long stall is caught up in bounded bursts


def test_stamp_round_trip_and_short_bodies():
    body = Stamper(100).stamp()
    assert len(body) == 100
    assert abs(stamp_of(body) - time.time_ns() // 1000) < 1_000_000
    assert Stamper(4).stamp() == b"magn" and stamp_of(b"magn") is None
    assert stamp_of(b"x" * 100) is None  # not a plausible time: a foreign body


def test_histograms_merge_across_encoding():
    a, b = latency.new_histogram(), latency.new_histogram()
    for v in range(1, 1001):
        latency.record(a, v)
    latency.record(b, 10**12)  # clamped, not lost
    total = latency.new_histogram()
    latency.merge_encoded(total, latency.encode(a))
    latency.merge_encoded(total, latency.encode(b))
    latency.merge_encoded(total, latency.encode(latency.new_histogram()))  # empty: None
    s = latency.summary(total)
    assert s["count"] == 1001
    assert s["p50"] == pytest.approx(0.5, rel=0.01)
    assert s["max"] == pytest.approx(600_000, rel=0.01)
    assert latency.cdf(total)[-1][0] == 100
