"""Dispatch rate limits (Pulsar's ``dispatchRate`` and
``subscriptionDispatchRate`` policies of a namespace or a topic): messages
and bytes per period a topic, and each of its subscriptions, may send to
consumers.

As in Pulsar, the topic's rate is shared by all its subscriptions and each
subscription's rate is its own; a dispatch goes when both allow it. A
dispatcher over the rate reads nothing until the period has paid for what
went (``subscriptions.throttle`` is the seam): messages stay in the
backlog, nothing is dropped or failed. Each limit is a token bucket holding
one period's worth, refilled continuously. Reads are cut to the messages
the bucket holds, but a batch entry goes whole and the byte limit is known
only after the read: the bucket then goes into debt, and the next dispatch
waits for it to be repaid, so the rate holds over a stream.

:func:`dispatch_rates_for` turns the policies in force (else the broker's
defaults) into the topic's :class:`TopicDispatchRates` (or ``UNLIMITED``).
"""
from __future__ import annotations

import time
from typing import Callable

from magnetar.broker.config import BrokerConfig
from magnetar.broker.subscriptions.throttle import UNLIMITED, DispatchRates, DispatchThrottle

#: Shortest wait between two tries of a throttled dispatcher (a timer per try).
MIN_RETRY_S = 0.01


class DispatchRateLimiter:
    """``msg_rate`` messages and ``byte_rate`` bytes every ``period_s`` seconds
    (<= 0: that one is not limited)."""

    __slots__ = ("msg_rate", "byte_rate", "period_s", "_msgs", "_bytes", "_at", "_clock")

    def __init__(self, msg_rate: int, byte_rate: int, period_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.msg_rate = max(msg_rate, 0)
        self.byte_rate = max(byte_rate, 0)
        self.period_s = period_s
        self._msgs = float(self.msg_rate)
        self._bytes = float(self.byte_rate)
        self._clock = clock
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        elapsed, self._at = now - self._at, now
        if self.msg_rate:
            self._msgs = min(float(self.msg_rate), self._msgs + elapsed * self.msg_rate / self.period_s)
        if self.byte_rate:
            self._bytes = min(float(self.byte_rate), self._bytes + elapsed * self.byte_rate / self.period_s)

    def allowance(self, wanted: int) -> int:
        self._refill()
        if self.byte_rate and self._bytes <= 0:
            return 0
        if self.msg_rate:
            return max(0, min(wanted, int(self._msgs + 1e-9)))  # 0.9999... after a refill is 1
        return wanted

    def retry_after(self) -> float:
        self._refill()
        wait = 0.0
        if self.msg_rate and self._msgs < 1:
            wait = (1 - self._msgs) * self.period_s / self.msg_rate
        if self.byte_rate and self._bytes <= 0:
            wait = max(wait, (1 - self._bytes) * self.period_s / self.byte_rate)
        return max(wait, MIN_RETRY_S)

    def charge(self, messages: int, nbytes: int) -> None:
        self._refill()
        if self.msg_rate:
            self._msgs -= messages
        if self.byte_rate:
            self._bytes -= nbytes


class _Both:
    """A subscription's throttle: the topic's limiter and its own (either may be None)."""

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: DispatchRateLimiter | None) -> None:
        self._limiters = [lim for lim in limiters if lim is not None]

    def allowance(self, wanted: int) -> int:
        for limiter in self._limiters:
            wanted = limiter.allowance(wanted)
        return wanted

    def retry_after(self) -> float:
        return max(limiter.retry_after() for limiter in self._limiters)

    def charge(self, messages: int, nbytes: int) -> None:
        for limiter in self._limiters:
            limiter.charge(messages, nbytes)


def _rate(policy: dict | None) -> tuple[int, int, int] | None:
    """(messages, bytes, period) of a stored DispatchRate, None when it limits nothing."""
    if not policy:
        return None
    msgs = int(policy.get("dispatchThrottlingRateInMsg", -1))
    nbytes = int(policy.get("dispatchThrottlingRateInByte", -1))
    if msgs <= 0 and nbytes <= 0:
        return None
    return msgs, nbytes, max(1, int(policy.get("ratePeriodInSecond", 1)))


class TopicDispatchRates:
    """The dispatch rates of one topic: ``topic_rate`` shared by its
    subscriptions, ``subscription_rate`` for each (either None: no limit).
    A subscription's limiter is made on its first dispatch and kept by name
    (a subscription deleted and created again keeps its bucket)."""

    def __init__(self, topic_rate: tuple[int, int, int] | None,
                 subscription_rate: tuple[int, int, int] | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.topic_rate = topic_rate
        self.subscription_rate = subscription_rate
        self._clock = clock
        self._topic = DispatchRateLimiter(*topic_rate, clock=clock) if topic_rate else None
        self._throttles: dict[str, DispatchThrottle] = {}

    def throttle(self, subscription: str) -> DispatchThrottle:
        found = self._throttles.get(subscription)
        if found is None:
            own = DispatchRateLimiter(*self.subscription_rate, clock=self._clock) if self.subscription_rate else None
            found = self._throttles[subscription] = _Both(self._topic, own)
        return found


def _broker_default(msgs: int, nbytes: int) -> dict:
    return {"dispatchThrottlingRateInMsg": msgs, "dispatchThrottlingRateInByte": nbytes, "ratePeriodInSecond": 1}


def dispatch_rates_for(policies: dict, config: BrokerConfig, current: DispatchRates) -> DispatchRates:
    """The topic's dispatch rates for the ``dispatch_rate`` and
    ``subscription_dispatch_rate`` policies in force (``policies``: the
    topic's over its namespace's), else the broker's
    ``dispatch_throttling_rate_per_*`` settings; ``current`` is kept (with
    its buckets) when the rates did not change."""
    topic_policy, subscription_policy = policies.get("dispatch_rate"), policies.get("subscription_dispatch_rate")
    if topic_policy is None:
        topic_policy = _broker_default(config.dispatch_throttling_rate_per_topic_in_msg,
                                       config.dispatch_throttling_rate_per_topic_in_byte)
    if subscription_policy is None:
        subscription_policy = _broker_default(config.dispatch_throttling_rate_per_subscription_in_msg,
                                              config.dispatch_throttling_rate_per_subscription_in_byte)
    topic_rate, subscription_rate = _rate(topic_policy), _rate(subscription_policy)
    if topic_rate is None and subscription_rate is None:
        return UNLIMITED
    if isinstance(current, TopicDispatchRates) and (current.topic_rate, current.subscription_rate) == \
            (topic_rate, subscription_rate):
        return current
    return TopicDispatchRates(topic_rate, subscription_rate)
