"""Rates of the last stats interval (Pulsar's statsUpdateFrequencyInSecs) and
a partitioned topic's totals."""
from __future__ import annotations

from magnetar.admin.partitioned_stats import merge_partitions
from magnetar.broker.interval_rates import IntervalRates


def test_rates_are_those_of_the_last_interval_counted_from_creation():
    rates = IntervalRates(2, now=100.0)
    assert rates.rates == (0.0, 0.0)
    rates.sample((50, 5000), now=102.0)  # made at 100: the first interval counts from then
    assert rates.rates == (25.0, 2500.0)
    rates.sample((50, 5000), now=112.0)  # an idle interval reads 0, not an average since creation
    assert rates.rates == (0.0, 0.0)
    rates.sample((40, 4000), now=113.0)  # a counter that went down is no traffic, never negative
    assert rates.rates == (0.0, 0.0)
    rates.sample((40, 4000), now=113.0)  # no time passed: the last rates stand
    assert rates.rates == (0.0, 0.0)


def _partition(msg_in: int, rate_in: float, backlog: int, acked_ms: int, earliest: int) -> dict:
    return {
        "msgRateIn": rate_in, "msgThroughputIn": rate_in * 100, "averageMsgSize": 100.0, "msgInCounter": msg_in,
        "storageSize": msg_in * 120, "backlogQuotaLimitSize": -1, "earliestMsgPublishTimeInBacklogs": earliest,
        "deduplicationStatus": "Disabled",
        "publishers": [{"producerName": "p", "msgRateIn": rate_in, "msgInCounter": msg_in}],
        "subscriptions": {"s": {"type": "Shared", "msgBacklog": backlog, "lastAckedTimestamp": acked_ms,
                                "blockedSubscriptionOnUnackedMsgs": False, "isDurable": True,
                                "earliestMsgPublishTimeInBacklog": earliest,
                                "consumers": [{"consumerName": f"c{msg_in}"}]}},
        "replication": {},
    }


def test_partitioned_totals_sum_counters_and_keep_the_newest_and_oldest_times():
    per = {"t-partition-0": _partition(10, 2.0, 3, 1000, 0), "t-partition-1": _partition(30, 6.0, 4, 3000, 700)}
    total = merge_partitions(per, 2)
    assert total["metadata"] == {"partitions": 2}
    assert total["msgInCounter"] == 40 and total["msgRateIn"] == 8.0 and total["storageSize"] == 4800
    assert total["averageMsgSize"] == 100.0  # throughput over rate again, not a sum of averages
    assert total["backlogQuotaLimitSize"] == -1 and total["deduplicationStatus"] == "Disabled"
    assert total["earliestMsgPublishTimeInBacklogs"] == 700  # 0 is "none": the oldest known one
    sub = total["subscriptions"]["s"]
    assert sub["msgBacklog"] == 7 and sub["lastAckedTimestamp"] == 3000 and sub["type"] == "Shared"
    assert sub["isDurable"] is True and sub["earliestMsgPublishTimeInBacklog"] == 700
    assert [c["consumerName"] for c in sub["consumers"]] == ["c10", "c30"]
    assert total["publishers"] == [{"producerName": "p", "msgRateIn": 8.0, "msgInCounter": 40}]
    assert per["t-partition-0"]["subscriptions"]["s"]["msgBacklog"] == 3  # the partitions' own are untouched
