"""The passes over every loaded topic (broker/topic_walk.py): slices, and
one pass at a time per event loop, so the scrape, the stats round and the
load report together take no more of a busy loop than one of them."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker import topic_walk
from magnetar.broker.topic_walk import CHECK_EVERY, visit_in_slices


async def test_two_passes_started_together_take_turns(monkeypatch):
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)  # a slice of CHECK_EVERY items, then the loop runs
    order: list[str] = []
    first = asyncio.create_task(visit_in_slices(range(5 * CHECK_EVERY), lambda _: order.append("a")))
    second = asyncio.create_task(visit_in_slices(range(5 * CHECK_EVERY), lambda _: order.append("b")))
    assert await first == 5 and await second == 5
    # Each yielded to the loop four times, and the other did not run meanwhile.
    assert order == ["a"] * (5 * CHECK_EVERY) + ["b"] * (5 * CHECK_EVERY)


async def test_a_pass_that_fails_lets_the_next_one_go(monkeypatch):
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)

    def visit(item: int) -> None:
        if item == CHECK_EVERY + 1:
            raise ValueError("a topic that cannot be read")

    failing = asyncio.create_task(visit_in_slices(range(3 * CHECK_EVERY), visit))
    seen: list[int] = []
    after = asyncio.create_task(visit_in_slices(range(3), seen.append))
    with pytest.raises(ValueError):
        await failing
    assert await asyncio.wait_for(after, 5) == 1 and seen == [0, 1, 2]


async def test_a_cancelled_pass_lets_the_next_one_go(monkeypatch):
    monkeypatch.setattr(topic_walk, "SLICE_S", 0.0)
    started = asyncio.Event()

    def visit(_: int) -> None:
        started.set()

    endless = asyncio.create_task(visit_in_slices(iter(int, 1), visit))  # never ends by itself
    await started.wait()
    seen: list[int] = []
    after = asyncio.create_task(visit_in_slices(range(2), seen.append))
    await asyncio.sleep(0)
    assert not seen  # waiting for its turn
    endless.cancel()
    assert await asyncio.wait_for(after, 5) == 1 and seen == [0, 1]


def test_the_passes_share_of_a_busy_loop_is_a_tenth():
    assert topic_walk.SHARE == pytest.approx(0.1)
