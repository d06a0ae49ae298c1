"""Load reports: counters turned into rates, per broker and per bundle, and the pass that counts them."""
from __future__ import annotations

import asyncio

from magnetar.broker import topic_walk
from magnetar.broker.cluster.bundles import FULL
from magnetar.broker.cluster.load_report import BundleCounters, LoadSampler, count_by_bundle, message_load
from magnetar.broker.cluster.member import ClusterMember
from magnetar.broker.cluster.registry import BrokerInfo
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore

from .fake_host import FakeHost


def counters(**by_bundle) -> dict:
    made = {}
    for name, (msg_in, bytes_in, msg_out, bytes_out, topics) in by_bundle.items():
        c = BundleCounters()
        for _ in range(topics):
            c.add(msg_in // topics, bytes_in // topics, msg_out // topics, bytes_out // topics)
        made[name] = c
    return made


def test_rates_per_bundle_and_in_all_over_the_interval():
    sampler = LoadSampler(_then=0.0)
    sampler.sample(counters(a=(100, 1000, 0, 0, 1), b=(0, 0, 0, 0, 2)), now=0.0)
    report = sampler.sample(counters(a=(300, 3000, 200, 2000, 1), b=(40, 400, 80, 800, 2)), now=2.0)
    assert report["bundle_stats"]["a"] == {"msg_rate_in": 100.0, "msg_rate_out": 100.0, "throughput_in": 1000.0,
                                           "throughput_out": 1000.0, "topics": 1}
    assert report["bundles"] == {"a": 200.0, "b": 60.0}
    assert report["bundle_topics"] == {"a": 1, "b": 2}
    assert report["msg_rate_in"] == 120.0 and report["msg_rate_out"] == 140.0
    assert report["throughput_in"] == 1200.0 and report["throughput_out"] == 1400.0
    assert message_load(report) == 260.0
    assert report["memory_rss"] > 0 and report["memory_total"] >= report["memory_rss"]
    assert report["cpu"] >= 0 and report["cpu_cores"] >= 1


def test_a_topic_unloaded_between_two_reports_counts_zero_not_negative():
    sampler = LoadSampler(_then=0.0)
    sampler.sample(counters(a=(500, 5000, 500, 5000, 2)), now=0.0)
    report = sampler.sample(counters(a=(100, 1000, 100, 1000, 1)), now=1.0)
    assert report["bundles"] == {"a": 0.0} and report["msg_rate_in"] == 0.0


class CountedTopic:
    """A loaded topic as the load report reads it; each read of ``msg_in``
    counts in ``reads`` (so a test sees how far a pass has got)."""

    def __init__(self, name: str, n: int, reads: list[int]) -> None:
        self.name = parse(name)
        self._n = n
        self._reads = reads
        self.bytes_in, self.msg_out, self.bytes_out = 100 * n, 2 * n, 200 * n

    @property
    def msg_in(self) -> int:
        self._reads[0] += 1
        return self._n


async def test_a_report_pass_over_10000_topics_lets_the_event_loop_run_between_bounded_slices(monkeypatch):
    # In one piece, this pass held the loop 25-140 ms every 5 s at 10,000
    # topics (docs/object-storage.md, "The 5-s loop stall"). Asserted by
    # structure, not by time: how many topics the pass reads between two
    # turns of another task on the loop. A pass of broker/topic_walk.py:
    # with slices of no time at all, CHECK_EVERY topics a turn (500 before).
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)
    store = await MemoryMetadataStore.open()
    try:
        host = FakeHost()
        info = BrokerInfo("broker-0:8000", "pulsar://broker-0:6600", "http://broker-0:8000", "c")
        member = ClusterMember(store, info, host)
        reads = [0]
        host.topics = [CountedTopic(f"persistent://public/ns-{i % 3}/t-{i}", i, reads) for i in range(10_000)]
        seen: list[int] = []
        done = False

        async def other_traffic() -> None:
            while not done:
                seen.append(reads[0])
                await asyncio.sleep(0)

        ticker = asyncio.get_running_loop().create_task(other_traffic())
        await asyncio.sleep(0)
        counters = await member.bundle_counters()
        done = True
        await ticker

        assert reads[0] == 10_000
        marks = [0, *seen, reads[0]]
        assert max(b - a for a, b in zip(marks, marks[1:])) <= topic_walk.CHECK_EVERY
        assert len(set(seen)) >= 10_000 // topic_walk.CHECK_EVERY
        # The same figures as placing each topic in its bundle one by one.
        expected: dict = {}
        for t in host.topics:
            expected.setdefault(member.bundle_of(t.name), BundleCounters()).add(
                t._n, t.bytes_in, t.msg_out, t.bytes_out)
        assert counters == expected and len(counters) == 12
    finally:
        await store.close()


async def test_a_pass_places_each_namespace_by_one_layout_even_if_a_split_lands_midway(monkeypatch):
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)  # the loop runs (and a split may land) every few topics
    calls: list[str] = []
    layouts = [[0, FULL // 2, FULL], [0, FULL // 4, FULL // 2, FULL]]

    def bounds_of(namespace: str) -> list[int]:
        calls.append(namespace)
        return layouts[min(len(calls) - 1, 1)]  # a split after the first look

    reads = [0]
    topics = [CountedTopic(f"persistent://public/default/t-{i}", 1, reads) for i in range(50)]
    counters = await count_by_bundle(topics, bounds_of)
    assert calls == ["public/default"]
    assert {(b.lower, b.upper) for b in counters} <= {(0, FULL // 2), (FULL // 2, FULL)}
    assert sum(c.topics for c in counters.values()) == 50
