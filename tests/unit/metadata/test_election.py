"""LeaderElection on every backend."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import LeaderElection, SessionExpired

PATH = "/leaders/test"


async def contenders(store, *values):
    sessions = [await store.create_session(ttl_s=30) for _ in values]
    return sessions, [LeaderElection(store, PATH, v, s) for v, s in zip(values, sessions)]


async def test_one_leader_at_a_time_and_handover_on_release(store):
    _, (one, two) = await contenders(store, b"one", b"two")
    await asyncio.wait_for(one.acquire(), 5)
    assert one.is_leader
    assert not await two.try_acquire()
    waiting = asyncio.create_task(two.acquire())
    assert await one.leader() == b"one"
    assert (await store.get(PATH)).ephemeral

    await one.release()

    await asyncio.wait_for(waiting, 5)
    assert two.is_leader and not one.is_leader
    assert await two.leader() == b"two"
    await asyncio.wait_for(one.wait_lost(), 5)  # returns at once when not leading


async def test_leader_session_close_hands_over(store):
    (s1, _), (one, two) = await contenders(store, b"one", b"two")
    assert await one.try_acquire()
    waiting = asyncio.create_task(two.acquire())
    await s1.close()
    await asyncio.wait_for(one.wait_lost(), 5)
    assert not one.is_leader
    await asyncio.wait_for(waiting, 5)
    assert two.is_leader


async def test_external_delete_or_overwrite_ends_leadership(store):
    _, (one,) = await contenders(store, b"one")
    assert await one.try_acquire()
    await store.delete(PATH)
    await asyncio.wait_for(one.wait_lost(), 5)
    assert not one.is_leader

    assert await one.try_acquire()
    await store.put(PATH, b"usurper")
    await asyncio.wait_for(one.wait_lost(), 5)
    assert not one.is_leader


async def test_changes_below_the_key_do_not_end_leadership(store, recorder):
    _, (one,) = await contenders(store, b"one")
    assert await one.try_acquire()
    seen = recorder()
    store.watch(PATH, seen)
    await store.put(PATH + "/child", b"")
    await seen.next()  # the guard watch got the same notification by now
    assert one.is_leader


async def test_acquire_is_reentrant_and_release_is_idempotent(store):
    _, (one,) = await contenders(store, b"one")
    await one.acquire()
    assert await one.try_acquire()
    await one.release()
    await one.release()
    assert await store.get(PATH) is None


async def test_acquire_with_ended_session_raises(store):
    (s1,), (one,) = await contenders(store, b"one")
    await s1.close()
    with pytest.raises(SessionExpired):
        await one.acquire()


async def test_waiting_contender_gives_up_when_its_session_ends(store):
    (_, s2), (one, _) = await contenders(store, b"one", b"two")
    two = LeaderElection(store, PATH, b"two", s2, retry_s=0.05)  # the retry notices the session's end
    assert await one.try_acquire()
    waiting = asyncio.create_task(two.acquire())
    await s2.close()
    with pytest.raises(SessionExpired):
        await asyncio.wait_for(waiting, 5)
    assert one.is_leader
