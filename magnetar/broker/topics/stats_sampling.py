"""The stats round: every loaded topic's counters sampled once per stats interval.

Pulsar's brokers update every topic's rates each ``statsUpdateFrequencyInSecs``;
this is that round (``stats_update_frequency_s``). Each topic, producer,
subscription and consumer keeps an :class:`~magnetar.broker.interval_rates.IntervalRates`;
a round hands each one its counters, so admin stats report the rates of the
last interval (0.0 until an object's first sample). A round costs a
few tuple builds per attached object and yields the event loop every
:data:`CHUNK_TOPICS` topics, so 100,000 loaded topics delay traffic by one
chunk at a time. Non-persistent topics keep no interval rates and are skipped.

A chunk was 2,000 topics until it was measured: 7-9 ms of the event loop
each (a topic with one producer, niced, on the 2-core development machine
with a bench beside it), five such stalls every 10 s at 10,000 topics;
500 keeps a chunk near 2 ms (docs/object-storage.md, "The 5-s loop stall").
"""
from __future__ import annotations

import asyncio
import time
from typing import Any, Callable

from magnetar.broker.policies.sweep import start_sweep

#: Topics sampled between two yields to the event loop.
CHUNK_TOPICS = 500


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
    for start in range(0, len(loaded), CHUNK_TOPICS):
        now = clock()
        for topic in loaded[start:start + CHUNK_TOPICS]:
            sample_topic(topic, now)
        await asyncio.sleep(0)
    return len(loaded)


def start_sampling(topics: dict[str, Any], interval_s: float) -> asyncio.Task:
    """Sample ``topics`` every ``interval_s`` seconds in a task (stop it with ``sweep.stop_sweep``)."""
    return start_sweep(interval_s, lambda: sample_all(topics), "stats sampling")
