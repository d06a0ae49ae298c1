"""Per managed ledger retention overrides (RetentionPolicy, Pulsar's rule)."""
from __future__ import annotations

import asyncio
import math

import pytest

from magnetar.storage import RetentionPolicy


async def fill(ml, n: int):
    return [await ml.append(f"e{i:04d}".encode()) for i in range(n)]


async def consumed(factory, name: str, n: int, retention=None):
    ml = await factory.open(name, retention=retention)
    p = await fill(ml, n)
    cursor = await ml.open_cursor("sub", "latest")
    await cursor.mark_delete(p[-1])
    return ml


@pytest.mark.parametrize("bad", [-1, float("nan"), "1", True, None])
def test_policy_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        RetentionPolicy(bad, 0)
    with pytest.raises(ValueError):
        RetentionPolicy(0, bad)


async def test_infinite_policy_keeps_consumed_ledgers(factories):
    ml = await consumed(factories(max_entries_per_ledger=5), "t", 20, RetentionPolicy(math.inf, math.inf))
    await asyncio.sleep(0.05)
    assert ml.entry_count == 20


async def test_dropping_the_override_trims_with_the_factory_rule(factories, wait_until):
    ml = await consumed(factories(max_entries_per_ledger=5), "t", 20, RetentionPolicy(math.inf, math.inf))
    assert ml.retention == RetentionPolicy(math.inf, math.inf)
    ml.set_retention(None)
    # Everything consumed goes but the ledger holding the last entry.
    await wait_until(lambda: ml.entry_count == 5, what="trim after the override went")


async def test_either_limit_is_enough(factories, wait_until):
    # Young ledgers, but over the size limit: Pulsar's rule deletes them
    # (the factory rule, which needs both limits exceeded, would not).
    factory = factories(max_entries_per_ledger=5)
    ml = await consumed(factory, "t", 20, RetentionPolicy(3600, 120))  # 4 closed ledgers of 65 bytes
    await wait_until(lambda: ml.total_size <= 120, what="size-based trim")
    assert ml.entry_count == 5  # the newest consumed ledger fits: it stays
    # Small, but old enough: deleted too, once the time limit passes.
    aged = await consumed(factory, "aged", 10, RetentionPolicy(0.2, math.inf))
    await asyncio.sleep(0.05)
    assert aged.entry_count == 10
    await wait_until(lambda: aged.entry_count == 5, what="time-based trim")  # the last ledger stays


async def test_reopening_applies_the_new_policy(factories, wait_until):
    factory = factories(max_entries_per_ledger=5)
    ml = await consumed(factory, "t", 20, RetentionPolicy(math.inf, math.inf))
    same = await factory.open("t", retention=RetentionPolicy(0, 0))
    assert same is ml
    await wait_until(lambda: ml.entry_count == 5, what="trim under the new policy")
