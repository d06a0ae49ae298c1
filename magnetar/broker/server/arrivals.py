"""The destination's side of a bundle move: loading the moving topics before
the bundle becomes this broker's.

A source releasing a bundle (PIP-307) names the topics it had loaded in the
Assigning record (:attr:`..cluster.channel.BundleState.topics`). The
destination loads them here before it writes Owned, so that the clients
the source then hands over find each topic's ledger already fenced,
recovered and a new one created, its cursors and producer sequences read:
their first sends wait for one commit, not for a load (on object storage a
load is a dozen metadata round trips and a GET, which under load took most
of a second).

Contract: :func:`prepare` returns within ``timeout_s``; loads still under
way then go on (the clients' own requests join them); a topic that fails to
load is logged and loads again on first use. Loads run through the
service's own path (its load slots, one load per name), without the owner
check: the bundle is Assigning to this broker, and a client's request that
arrives meanwhile still waits for Owned (``get_topic``).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from ..topics.moving import MovingTopic
from ..topic_name import TopicName, parse

log = logging.getLogger(__name__)

#: How long a destination spends loading a moving bundle's topics before it
#: takes the bundle anyway (the rest finish in the background).
PREPARE_TIMEOUT_S = 5.0


async def prepare(moving: list[MovingTopic], belongs: Callable[[TopicName], bool],
                  load: Callable[[TopicName, MovingTopic], Awaitable[object]],
                  timeout_s: float = PREPARE_TIMEOUT_S) -> int:
    """Load each of ``moving`` that ``belongs`` to the bundle (a name the
    record carries that is not of the bundle, or not a persistent topic, is
    skipped) with ``load``; returns how many loaded within ``timeout_s``."""
    wanted = []
    for m in moving:
        try:
            topic = parse(m.name)
        except ValueError:
            continue
        if topic.domain == "persistent" and belongs(topic):
            wanted.append((topic, m))
    if not wanted:
        return 0
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(load(topic, m)) for topic, m in wanted]
    for task, (topic, _) in zip(tasks, wanted):
        task.add_done_callback(lambda t, n=topic: _report(t, n))
    done, _ = await asyncio.wait(tasks, timeout=timeout_s)
    return sum(1 for t in done if not t.cancelled() and t.exception() is None)


def _report(task: asyncio.Task, name: TopicName) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("preparing %s for its move here failed (it loads on first use): %s", name, exc)
