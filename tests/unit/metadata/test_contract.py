"""The MetadataStore contract, run against every backend (see conftest.BACKENDS)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.metadata import (
    BadVersion,
    Compare,
    EventType,
    KeyNotFound,
    Notification,
    Put,
    Record,
    SessionExpired,
)

# --- get / put / versions -------------------------------------------------


async def test_get_missing_key_is_none(store):
    assert await store.get("/nope") is None
    assert not await store.exists("/nope")


async def test_create_with_minus_one(store):
    assert await store.put("/k", b"v", -1) == 0
    assert await store.get("/k") == Record("/k", b"v", 0, False)
    with pytest.raises(BadVersion):
        await store.put("/k", b"other", -1)
    assert await store.get("/k") == Record("/k", b"v", 0, False)


async def test_cas_success(store):
    await store.put("/k", b"v0", -1)
    assert await store.put("/k", b"v1", 0) == 1
    assert await store.put("/k", b"v2", 1) == 2
    assert await store.get("/k") == Record("/k", b"v2", 2, False)


async def test_cas_bad_version_changes_nothing(store):
    await store.put("/k", b"v0", -1)
    await store.put("/k", b"v1", 0)
    with pytest.raises(BadVersion):
        await store.put("/k", b"stale", 0)
    assert await store.get("/k") == Record("/k", b"v1", 1, False)


async def test_cas_on_missing_key_is_not_found(store):
    with pytest.raises(KeyNotFound):
        await store.put("/k", b"v", 0)
    assert await store.get("/k") is None


async def test_unconditional_put_increments_version(store):
    assert [await store.put("/k", bytes([i])) for i in range(3)] == [0, 1, 2]
    assert await store.get("/k") == Record("/k", b"\x02", 2, False)


async def test_values_are_bytes_like(store):
    await store.put("/k", bytearray(b"ab"))
    await store.put("/m", memoryview(b"cd"))
    assert (await store.get("/k")).value == b"ab"
    assert (await store.get("/m")).value == b"cd"
    await store.put("/empty", b"")
    assert (await store.get("/empty")).value == b""
    with pytest.raises(TypeError):
        await store.put("/k", "text")
    with pytest.raises(TypeError):
        await store.put("/k", 5)


async def test_concurrent_cas_has_one_winner(store):
    await store.put("/k", b"v", -1)

    async def attempt(i: int) -> bool:
        try:
            await store.put("/k", bytes([i]), 0)
            return True
        except BadVersion:
            return False

    wins = await asyncio.gather(*(attempt(i) for i in range(10)))
    assert wins.count(True) == 1
    assert (await store.get("/k")).version == 1


async def test_concurrent_creates_have_one_winner(store):
    async def attempt(i: int) -> bool:
        try:
            await store.put("/k", bytes([i]), -1)
            return True
        except BadVersion:
            return False

    assert (await asyncio.gather(*(attempt(i) for i in range(10)))).count(True) == 1


# --- delete ---------------------------------------------------------------


async def test_delete_without_version(store):
    await store.put("/k", b"v")
    await store.put("/k", b"v")
    await store.delete("/k")
    assert await store.get("/k") is None


async def test_delete_with_version(store):
    await store.put("/k", b"v")
    await store.put("/k", b"v")
    with pytest.raises(BadVersion):
        await store.delete("/k", 0)
    assert (await store.get("/k")).version == 1
    await store.delete("/k", 1)
    assert await store.get("/k") is None


async def test_delete_missing_is_not_found(store):
    with pytest.raises(KeyNotFound):
        await store.delete("/k")
    with pytest.raises(KeyNotFound):
        await store.delete("/k", 0)


async def test_recreated_key_starts_at_version_zero(store):
    await store.put("/k", b"a")
    await store.put("/k", b"b")
    await store.delete("/k")
    assert await store.put("/k", b"c", -1) == 0


async def test_delete_leaves_descendants(store):
    await store.put("/a", b"")
    await store.put("/a/b", b"")
    await store.delete("/a")
    assert await store.get("/a/b") is not None
    assert await store.children("/a") == ["b"]


# --- children -------------------------------------------------------------


async def test_children(store):
    for key in ["/a/c/d/e", "/a/b", "/ab", "/a/b/x", "/a/a-b", "/a", "/z"]:
        await store.put(key, b"")
    # immediate names only, sorted, including "c" which only has descendants
    assert await store.children("/a") == ["a-b", "b", "c"]
    assert await store.children("/a/c") == ["d"]
    assert await store.children("/a/b") == ["x"]
    assert await store.children("/") == ["a", "ab", "z"]
    assert await store.children("/a/b/x") == []
    assert await store.children("/missing") == []


async def test_children_records_pages_in_name_order(store):
    names = [f"{i:04d}" for i in range(0, 40, 2)]
    for n in reversed(names):
        await store.put(f"/r/{n}", n.encode())
    await store.put("/r/0004/deeper", b"x")  # below a child: not one of its records
    await store.put("/r/0007/only-deeper", b"x")  # a child without a record of its own
    await store.put("/rr/0001", b"x")  # beside the key, not below it
    page = await store.children_records("/r", "", 5)
    assert [(r.key, r.value, r.version) for r in page] == [(f"/r/{n}", n.encode(), 0) for n in names[:5]]
    assert [r.key for r in await store.children_records("/r", "0005", 3)] == ["/r/0006", "/r/0008", "/r/0010"]
    assert [r.key for r in await store.children_records("/r", "0036\x00", 10)] == ["/r/0038"]
    assert await store.children_records("/r", "0039", 10) == []
    assert await store.children_records("/missing", "", 10) == []
    seen, start = [], ""
    while page := await store.children_records("/r", start, 3):
        seen += [r.key for r in page]
        start = page[-1].key.rsplit("/", 1)[-1] + "\x00"
    assert seen == [f"/r/{n}" for n in names]
    # a key whose children come from two stores (the routed backend's /a)
    for key in ["/a/a-b", "/a/b", "/a/b/x", "/a/c/d"]:
        await store.put(key, b"")
    assert [r.key for r in await store.children_records("/a", "", 10)] == ["/a/a-b", "/a/b"]
    with pytest.raises(ValueError):
        await store.children_records("/r", "", 0)


async def test_keys_below_lists_every_key_under_a_key_without_values(store):
    for key in ["/k/b/c/d", "/k/a", "/k/b", "/k/b/x", "/kk/a", "/k"]:
        await store.put(key, b"v")
    assert await store.keys_below("/k") == ["a", "b", "b/c/d", "b/x"]  # not /k itself, not /kk; /k/b/c has no key
    assert await store.keys_below("/k/b") == ["c/d", "x"]
    assert await store.keys_below("/missing") == []
    # a key whose children come from two stores (the routed backend's /a)
    for key in ["/a/a-b", "/a/b", "/a/b/x", "/a/c/d"]:
        await store.put(key, b"")
    assert await store.keys_below("/a") == ["a-b", "b", "b/x", "c/d"]


async def test_root_key_is_not_its_own_child(store):
    await store.put("/", b"root")
    await store.put("/a", b"")
    assert await store.children("/") == ["a"]


# --- counters -------------------------------------------------------------


async def test_increment_is_monotonic(store):
    values = [await store.increment("/ids") for _ in range(5)]
    assert values == [1, 2, 3, 4, 5]
    assert await store.increment("/ids", 10) == 15
    assert await store.increment("/other") == 1


async def test_concurrent_increments_never_repeat(store):
    values = await asyncio.gather(*(store.increment("/ids", 3) for _ in range(50)))
    assert sorted(values) == list(range(3, 151, 3))


async def test_counters_are_apart_from_keys(store):
    await store.increment("/ids")
    assert await store.get("/ids") is None
    await store.put("/ids", b"x")
    assert await store.increment("/ids") == 2


@pytest.mark.parametrize("delta", [0, -1, True, 1.5])
async def test_increment_rejects_non_positive_delta(store, delta):
    with pytest.raises(ValueError):
        await store.increment("/ids", delta)


# --- watches --------------------------------------------------------------


async def test_watch_create_modify_delete_under_prefix(store, recorder):
    seen = recorder()
    store.watch("/w", seen)
    await store.put("/w/x", b"1")
    await store.put("/w/x", b"2")
    await store.delete("/w/x")
    await store.put("/w", b"")
    await store.put("/w/deep/er", b"")
    assert [await seen.next() for _ in range(5)] == [
        Notification(EventType.CREATED, "/w/x"),
        Notification(EventType.MODIFIED, "/w/x"),
        Notification(EventType.DELETED, "/w/x"),
        Notification(EventType.CREATED, "/w"),
        Notification(EventType.CREATED, "/w/deep/er"),
    ]


async def test_a_notification_names_the_version_the_write_gave_the_key(store, recorder):
    seen = recorder()
    store.watch("/w", seen)
    created = await store.put("/w/x", b"1")
    modified = await store.put("/w/x", b"2", created)
    (in_txn,) = await store.transaction([Compare("/w/x", modified)], [Put("/w/x", b"3")])
    await store.delete("/w/x")
    notes = [await seen.next() for _ in range(4)]
    assert [n.version for n in notes] == [created, modified, in_txn, None]  # a deletion names none
    assert len({created, modified, in_txn}) == 3


async def test_watch_ignores_keys_outside_prefix(store, recorder):
    seen = recorder()
    store.watch("/w", seen)
    await store.put("/wx", b"")  # shares the string prefix, not the path
    await store.put("/other/w", b"")
    await store.put("/", b"")
    await store.put("/w/last", b"")  # notifications are ordered: this one comes after any stray ones
    assert await seen.next() == Notification(EventType.CREATED, "/w/last")
    assert seen.pending() == []


async def test_watch_on_root_sees_everything(store, recorder):
    seen = recorder()
    store.watch("/", seen)
    await store.put("/a/b", b"")
    assert await seen.next() == Notification(EventType.CREATED, "/a/b")


async def test_cancelled_watch_stops(store, recorder):
    cancelled, kept = recorder(), recorder()
    watch = store.watch("/w", cancelled)
    store.watch("/w", kept)
    await store.put("/w/a", b"")
    assert await cancelled.next() == Notification(EventType.CREATED, "/w/a")
    watch.cancel()
    await store.put("/w/b", b"")
    await store.delete("/w/a")
    assert await kept.next() == Notification(EventType.CREATED, "/w/a")
    assert await kept.next() == Notification(EventType.CREATED, "/w/b")
    assert await kept.next() == Notification(EventType.DELETED, "/w/a")
    assert cancelled.pending() == []


async def test_nothing_arrives_after_cancel_returns(store, recorder):
    # Cancel right after the write, when its notification may still be on its
    # way to the callback: whatever had not arrived by cancel() never does.
    seen = []
    watch = store.watch("/w", seen.append)
    await store.put("/w/a", b"")
    watch.cancel()
    arrived = len(seen)
    later = recorder()
    store.watch("/w", later)
    await store.put("/w/b", b"")
    await later.next()
    assert len(seen) == arrived


async def test_failing_callback_does_not_stop_others(store, recorder):
    loop = asyncio.get_running_loop()
    errors = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context.get("exception")))
    try:

        def explode(note):
            raise RuntimeError("callback failed")

        seen = recorder()
        store.watch("/w", explode)
        store.watch("/w", seen)
        await store.put("/w/a", b"")
        await store.put("/w/b", b"")
        assert (await seen.next()).key == "/w/a"
        assert (await seen.next()).key == "/w/b"
        assert len(errors) == 2 and all(isinstance(e, RuntimeError) for e in errors)
    finally:
        loop.set_exception_handler(None)


# --- sessions -------------------------------------------------------------


async def test_ephemeral_keys_vanish_on_session_close(store, recorder):
    session = await store.create_session(ttl_s=30)
    other = await store.create_session(ttl_s=30)
    assert session.alive
    await store.put("/e/mine", b"1", -1, session=session)
    await store.put("/e/theirs", b"2", session=other)
    await store.put("/e/persistent", b"3")
    assert (await store.get("/e/mine")).ephemeral
    assert not (await store.get("/e/persistent")).ephemeral
    seen = recorder()
    store.watch("/e", seen)

    await session.close()

    assert not session.alive
    assert await store.get("/e/mine") is None
    assert (await store.get("/e/theirs")).value == b"2"
    assert (await store.get("/e/persistent")).value == b"3"
    assert await seen.next() == Notification(EventType.DELETED, "/e/mine")
    await session.close()  # idempotent
    await other.close()


async def test_put_with_closed_session_raises(store):
    session = await store.create_session(ttl_s=30)
    await session.close()
    with pytest.raises(SessionExpired):
        await store.put("/e", b"", session=session)
    with pytest.raises(SessionExpired):
        await store.put("/e", b"", -1, session=session)
    assert await store.get("/e") is None


async def test_unconditional_put_takes_over_ephemeral_key(store):
    session = await store.create_session(ttl_s=30)
    await store.put("/e", b"a", session=session)
    await store.put("/e", b"b")  # now persistent: survives the session
    await session.close()
    assert await store.get("/e") == Record("/e", b"b", 1, False)


async def test_delete_of_ephemeral_key(store):
    session = await store.create_session(ttl_s=30)
    await store.put("/e", b"a", session=session)
    await store.delete("/e")
    await store.put("/e", b"b")
    await session.close()
    assert (await store.get("/e")).value == b"b"  # the closed session no longer owns it


@pytest.mark.parametrize("ttl", [0, -1])
async def test_session_ttl_must_be_positive(store, ttl):
    with pytest.raises(ValueError):
        await store.create_session(ttl_s=ttl)


# --- argument checks ------------------------------------------------------

BAD_KEYS = ["", "a", "a/b", "//a", "/a//b", "/a/", "/a\x00b", "/\udc80"]


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_bad_keys_raise_value_error(store, key):
    with pytest.raises(ValueError):
        await store.get(key)
    with pytest.raises(ValueError):
        await store.put(key, b"")
    with pytest.raises(ValueError):
        await store.delete(key)
    with pytest.raises(ValueError):
        await store.children(key)
    with pytest.raises(ValueError):
        await store.increment(key)
    with pytest.raises(ValueError):
        store.watch(key, lambda note: None)


@pytest.mark.parametrize("version", [-2, 1.0, "0", True])
async def test_bad_expected_version_raises_value_error(store, version):
    await store.put("/k", b"")
    with pytest.raises(ValueError):
        await store.put("/k", b"", version)
    with pytest.raises(ValueError):
        await store.delete("/k", version)
    assert await store.get("/k") == Record("/k", b"", 0, False)


async def test_store_is_an_async_context_manager(store):
    async with store as s:
        await s.put("/k", b"")
