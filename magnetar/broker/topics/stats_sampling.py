"""The stats round: every loaded topic's counters sampled once per stats interval.

Pulsar's brokers update every topic's rates each ``statsUpdateFrequencyInSecs``;
this is that round (``stats_update_frequency_s``). Each topic, producer,
subscription and consumer keeps an :class:`~magnetar.broker.interval_rates.IntervalRates`;
a round hands each one its counters, so admin stats report the rates of the
last interval (0.0 until an object's first sample). A round costs a
few tuple builds per attached object; it is a pass of
:mod:`magnetar.broker.topic_walk` (slices of about 2 ms, a bounded share of
a busy loop), each topic sampled at its own moment, so its rates still
cover one interval. Non-persistent topics keep no interval rates and are
skipped.

The round was cut in chunks of 500 topics with one loop turn between
(about 2 ms each, "The 5-s loop stall" in docs/object-storage.md); at
10,000 written topics near the loop's capacity those chunks still took
most of the loop while the round ran, and the round's burst every 10 s
was in the publish p99 ("Passes over every topic", same file).
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from magnetar.broker.policies.sweep import start_sweep
from magnetar.broker.topic_walk import visit_in_slices


def sample_topic(topic: Any, now: float) -> None:
    """Sample one persistent topic and everything attached to it at ``now`` (monotonic s)."""
    topic.interval_rates.sample((topic.msg_in, topic.bytes_in, topic.msg_out, topic.bytes_out), now)
    for producer in topic.producers.values():
        producer.interval_rates.sample((producer.msg_in, producer.bytes_in), now)
    for sub in topic.subscriptions.values():
        sub.interval_rates.sample((sub.msg_out, sub.bytes_out, sub.redelivered, sub.acked, sub.expired), now)
        for consumer in sub.consumers:
            consumer.interval_rates.sample((consumer.msg_out, consumer.bytes_out, consumer.redelivered,
                                            consumer.acked), now)


async def sample_all(topics: dict[str, Any], clock: Callable[[], float] = time.monotonic) -> int:
    """One round over ``topics`` (the service's loaded topics); returns how many were sampled."""
    loaded = [t for t in list(topics.values()) if hasattr(t, "interval_rates")]
    await visit_in_slices(loaded, lambda topic: sample_topic(topic, clock()))
    return len(loaded)


def start_sampling(topics: dict[str, Any], interval_s: float) -> asyncio.Task:
    """Sample ``topics`` every ``interval_s`` seconds in a task (stop it with ``sweep.stop_sweep``)."""
    return start_sweep(interval_s, lambda: sample_all(topics), "stats sampling")
