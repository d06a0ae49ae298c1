"""Load reports: counters turned into rates, per broker and per bundle."""
from __future__ import annotations

from magnetar.broker.cluster.load_report import BundleCounters, LoadSampler, message_load


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
