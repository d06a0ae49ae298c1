"""Dispatch rate limits: the token buckets, the topic's and the
subscriptions' rates together, what a policy turns into, and what an
operator may send."""
from __future__ import annotations

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.namespaces import policies
from magnetar.broker.namespaces.applied import overlay
from magnetar.broker.namespaces.resources import InvalidInput
from magnetar.broker.policies.dispatch_rate import DispatchRateLimiter, TopicDispatchRates, dispatch_rates_for
from magnetar.broker.subscriptions.throttle import UNLIMITED


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_holds_one_period_and_refills_over_it():
    clock = Clock()
    limiter = DispatchRateLimiter(10, -1, period_s=2, clock=clock)
    assert limiter.allowance(100) == 10  # one period's worth at once
    limiter.charge(10, 1000)
    assert limiter.allowance(100) == 0
    assert limiter.retry_after() == pytest.approx(0.2)  # one message every 0.2 s
    clock.now += 1.0
    assert limiter.allowance(100) == 5
    clock.now += 60
    assert limiter.allowance(100) == 10  # never more than a period's worth


def test_a_batch_over_the_rate_is_paid_for_before_the_next_dispatch():
    clock = Clock()
    limiter = DispatchRateLimiter(10, -1, clock=clock)
    limiter.charge(30, 0)  # one entry of 30 messages went whole
    assert limiter.allowance(5) == 0
    assert limiter.retry_after() == pytest.approx(2.1)
    clock.now += 2.1
    assert limiter.allowance(5) == 1


def test_bytes_are_known_after_the_read_so_a_debt_waits():
    clock = Clock()
    limiter = DispatchRateLimiter(-1, 1000, clock=clock)
    assert limiter.allowance(50) == 50  # no message limit: the read is not cut
    limiter.charge(50, 1500)
    assert limiter.allowance(50) == 0
    assert limiter.retry_after() == pytest.approx(0.501)
    clock.now += 0.6
    assert limiter.allowance(50) == 50


def test_the_topic_rate_is_shared_and_each_subscription_has_its_own():
    clock = Clock()
    rates = TopicDispatchRates((10, -1, 1), (4, -1, 1), clock=clock)
    a, b = rates.throttle("a"), rates.throttle("b")
    assert rates.throttle("a") is a
    assert a.allowance(100) == 4  # the subscription's own rate is the smaller
    a.charge(4, 0)
    assert a.allowance(100) == 0 and b.allowance(100) == 4
    b.charge(4, 0)
    c = rates.throttle("c")
    assert c.allowance(100) == 2  # what the two others left of the topic's 10
    clock.now += 0.25
    assert a.allowance(100) == 1 and c.allowance(100) == 4


def _rates(topic=None, subscription=None, current=UNLIMITED, config=BrokerConfig()):
    return dispatch_rates_for({"dispatch_rate": topic, "subscription_dispatch_rate": subscription}, config, current)


def test_policies_become_rates_and_unchanged_ones_keep_their_buckets():
    assert _rates() is UNLIMITED
    unlimited = {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": 0, "ratePeriodInSecond": 1}
    assert _rates(unlimited) is UNLIMITED
    rate = {"dispatchThrottlingRateInMsg": 100, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 5}
    first = _rates(rate)
    assert isinstance(first, TopicDispatchRates) and first.topic_rate == (100, -1, 5)
    assert _rates(dict(rate), current=first) is first
    assert _rates(rate, rate, current=first) is not first
    assert _rates(current=first) is UNLIMITED


def test_the_broker_defaults_apply_where_no_policy_is_set():
    config = BrokerConfig(dispatch_throttling_rate_per_topic_in_msg=1000,
                          dispatch_throttling_rate_per_subscription_in_byte=65536)
    rates = _rates(config=config)
    assert (rates.topic_rate, rates.subscription_rate) == ((1000, 0, 1), (0, 65536, 1))
    lifted = {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1}
    assert _rates(lifted, lifted, config=config) is UNLIMITED  # a policy wins, even one that lifts the limit


def test_a_topic_rate_wins_over_its_namespace_even_when_it_lifts_the_limit():
    namespace = {"dispatch_rate": {"dispatchThrottlingRateInMsg": 10}, "subscription_dispatch_rate": None}
    own = {"dispatch_rate": {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": -1}}
    assert dispatch_rates_for(overlay(namespace, own), BrokerConfig(), UNLIMITED) is UNLIMITED
    assert overlay(namespace, {})["dispatch_rate"] == {"dispatchThrottlingRateInMsg": 10}


def test_what_an_operator_may_send():
    assert policies.validate_dispatch_rate({"dispatchThrottlingRateInMsg": 50}) == {
        "dispatchThrottlingRateInMsg": 50, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1,
        "relativeToPublishRate": False}
    for bad, says in (({"dispatchThrottlingRateInMsg": "fast"}, "integer"),
                      ({"dispatchThrottlingRateInByte": -5}, ">= -1"),
                      ({"ratePeriodInSecond": 0}, "ratePeriodInSecond"),
                      ({"relativeToPublishRate": True}, "not supported"),
                      ({"rate": 5}, "dispatch rate must be"),
                      ([], "dispatch rate must be")):
        with pytest.raises(InvalidInput, match=says):
            policies.validate_dispatch_rate(bad)
