"""The periodic passes over every loaded topic let the event loop run between
bounded slices (the stats round, the inactive-topics round; the load
report's pass is in tests/unit/cluster/test_load_report.py).

Asserted by structure, not by time: how many topics a pass reads between
two turns of another task on the loop. In one piece, 10,000 topics were
read in a single turn (docs/object-storage.md, "The 5-s loop stall"). The
stats round is a pass of broker/topic_walk.py: with slices of no time at
all, it yields every CHECK_EVERY topics (in chunks of 500 before, whose
bursts were still in the publish p99 at 10,000 written topics)."""
from __future__ import annotations

import asyncio

from magnetar.broker.config import BrokerConfig
from magnetar.broker.interval_rates import IntervalRates
from magnetar.broker.policies.inactive import InactiveTopics
from magnetar.broker import topic_walk
from magnetar.broker.topic_name import parse
from magnetar.broker.topics import stats_sampling

N = 10_000
#: The most topics a pass may read in one turn of the loop (about 2 ms of work).
BOUND = 500


class Topic:
    """A loaded topic with one producer; a read of its ``msg_in`` puts it in ``read``."""

    def __init__(self, i: int, read: set[int]) -> None:
        self.name = parse(f"persistent://public/default/t-{i}")
        self._i, self._read = i, read
        self.closed = False
        self.bytes_in = self.msg_out = self.bytes_out = 0
        self.interval_rates = IntervalRates(4)
        self.producers = {"p": type("P", (), {"msg_in": 0, "bytes_in": 0, "interval_rates": IntervalRates(2)})()}
        self.subscriptions: dict = {}
        self.waiting = None
        self.replicators: dict = {}

    @property
    def msg_in(self) -> int:
        self._read.add(self._i)
        return 0


async def most_read_in_one_turn(read: set[int], a_pass) -> int:
    """Run ``a_pass`` beside a task that notes how many topics were ``read``
    at each loop turn; the most topics read between two of its turns."""
    seen: list[int] = []
    done = False

    async def other_traffic() -> None:
        while not done:
            seen.append(len(read))
            await asyncio.sleep(0)

    ticker = asyncio.get_running_loop().create_task(other_traffic())
    await asyncio.sleep(0)
    await a_pass
    done = True
    await ticker
    marks = [0, *seen, len(read)]
    return max(b - a for a, b in zip(marks, marks[1:]))


async def test_the_stats_round_over_10000_topics_is_a_pass_in_slices(monkeypatch):
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)
    read: set[int] = set()
    topics = {str(i): Topic(i, read) for i in range(N)}
    most = await most_read_in_one_turn(read, stats_sampling.sample_all(topics))
    assert len(read) == N and most <= topic_walk.CHECK_EVERY


async def test_the_inactive_round_over_10000_topics_yields_every_slice():
    read: set[int] = set()
    service = type("Service", (), {})()
    service.topics = {str(i): Topic(i, read) for i in range(N)}
    for topic in service.topics.values():
        topic.producers = {}  # idle: the round reads its counters
    rounds = InactiveTopics(service, BrokerConfig())
    most = await most_read_in_one_turn(read, rounds.round(now=0.0))
    assert len(read) == N and most <= BOUND
