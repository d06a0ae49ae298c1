"""A short history of topics' rates, kept in memory so that a topic's page
opens with its last minutes already drawn.

Every ``INTERVAL_S`` a task of the admin server samples the message rates in
and out of the persistent topics this broker has loaded (the figures the
stats already compute, read from memory) into a ring of ``POINTS`` points per
topic: 5 minutes at 2 s. Bounded: at most ``MAX_TOPICS`` topics are kept
(those loaded first; a topic unloaded is forgotten at the next sample), so
the history costs at most ``MAX_TOPICS * POINTS`` points (about 4 MB).
The topic's console detail answers its ring as ``history``; a partitioned
topic's, its partitions' rings (from whichever broker has each) summed.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque

from aiohttp import web

from ..params import BROKER

INTERVAL_S = 2.0
POINTS = 150
MAX_TOPICS = 200


class RateHistory:
    """``topic name -> deque of (unix seconds, rate in, rate out)``, bounded."""

    def __init__(self, points: int = POINTS, max_topics: int = MAX_TOPICS) -> None:
        self.points = points
        self.max_topics = max_topics
        self.rings: dict[str, deque] = {}

    def sample(self, topics: dict, now: float | None = None) -> None:
        """Add one point for each kept topic (``name -> topic``, the loaded
        ones); forget the topics no longer loaded. Every loaded topic is
        looked at only while there is room for more: once full, a sample
        visits the kept topics alone (with 10,000 loaded topics a scan of
        them all every 2 s was a stall of the event loop, py-spy)."""
        now = time.time() if now is None else now
        for name in [n for n in self.rings if n not in topics]:
            del self.rings[name]
        if len(self.rings) < self.max_topics:
            for name, topic in list(topics.items()):
                if len(self.rings) >= self.max_topics:
                    break
                if name not in self.rings and name.startswith("persistent://") and hasattr(topic, "rates"):
                    self.rings[name] = deque(maxlen=self.points)
        for name, ring in self.rings.items():
            topic = topics[name]
            rate_in, _, rate_out, _ = topic.rates.rates((topic.msg_in, topic.bytes_in, topic.msg_out, topic.bytes_out))
            ring.append((round(now, 3), rate_in, rate_out))

    def of(self, name: str) -> list:
        return [list(p) for p in self.rings.get(name, ())]


HISTORY = web.AppKey("console_history", RateHistory)


async def keep_history(app: web.Application):
    """aiohttp cleanup context: the sampling task, for the app's life."""
    history = app[HISTORY] = RateHistory()

    async def run() -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            service = getattr(app[BROKER], "service", None)
            if service is not None:
                history.sample(service.topics)

    task = asyncio.create_task(run())
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def history_of(request: web.Request, name: str) -> list:
    history = request.app.get(HISTORY)
    return history.of(name) if history is not None else []


def summed(rings: list[list]) -> list[list]:
    """Several topics' rings (from brokers that sample at their own moments)
    as one: points grouped by sampling interval, rates added, oldest first."""
    buckets: dict[float, list] = {}
    for ring in rings:
        for t, rate_in, rate_out in ring:
            key = round(t / INTERVAL_S) * INTERVAL_S
            point = buckets.setdefault(key, [key, 0.0, 0.0])
            point[1] += rate_in
            point[2] += rate_out
    return [buckets[k] for k in sorted(buckets)]
