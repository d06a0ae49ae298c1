"""SQLite-only behaviour: durability across reopen and crashes, expiry, equivalence with memory."""
from __future__ import annotations

import asyncio
import itertools
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.metadata import (
    EventType,
    MemoryMetadataStore,
    MetadataError,
    Notification,
    Record,
    SessionExpired,
    SqliteMetadataStore,
)

REPO = Path(__file__).resolve().parents[3]


async def test_values_versions_and_counters_survive_reopen(tmp_path):
    path = tmp_path / "meta.db"
    store = await SqliteMetadataStore.open(path)
    await store.put("/a", b"one")
    await store.put("/a", b"two")
    await store.put("/b/c", b"\x00\xff", -1)
    await store.put("/gone", b"")
    await store.delete("/gone")
    assert await store.increment("/ids", 5) == 5
    await store.close()

    store = await SqliteMetadataStore.open(path)
    try:
        assert await store.get("/a") == Record("/a", b"two", 1, False)
        assert await store.get("/b/c") == Record("/b/c", b"\x00\xff", 0, False)
        assert await store.get("/gone") is None
        assert await store.children("/") == ["a", "b"]
        assert await store.put("/a", b"three", 1) == 2
        assert await store.increment("/ids") == 6
    finally:
        await store.close()


async def test_close_deletes_ephemeral_keys(tmp_path):
    path = tmp_path / "meta.db"
    store = await SqliteMetadataStore.open(path)
    session = await store.create_session(ttl_s=30)
    await store.put("/e", b"", session=session)
    await store.close()
    assert not session.alive
    store = await SqliteMetadataStore.open(path)
    try:
        assert await store.get("/e") is None
    finally:
        await store.close()


CRASHING_WRITER = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from magnetar.metadata import SqliteMetadataStore

    async def main():
        store = await SqliteMetadataStore.open(sys.argv[1])
        session = await store.create_session(ttl_s=60)
        await store.put("/owners/t", b"me", -1, session=session)
        await store.put("/durable", b"d")
        await store.put("/durable", b"d2", 0)
        print(await store.increment("/ids", 7), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no cleanup: like kill -9

    asyncio.run(main())
    """
)


async def test_crashed_process_leaves_durable_writes_and_no_ephemeral_keys(tmp_path):
    path = tmp_path / "meta.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_WRITER, str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == -signal.SIGKILL, err.decode()
    assert out.split() == [b"7"]

    store = await SqliteMetadataStore.open(path)  # the dead process's lock is gone with it
    try:
        assert await store.get("/owners/t") is None
        assert await store.children("/owners") == []
        assert await store.get("/durable") == Record("/durable", b"d2", 1, False)
        assert await store.increment("/ids") == 8
    finally:
        await store.close()


async def test_second_open_of_same_file_is_refused(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        with pytest.raises(MetadataError, match="already open"):
            await SqliteMetadataStore.open(tmp_path / "meta.db")
        await store.put("/still", b"works")
    finally:
        await store.close()
    again = await SqliteMetadataStore.open(tmp_path / "meta.db")
    await again.close()


async def test_operations_after_close_raise(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(MetadataError, match="closed"):
        await store.get("/k")
    with pytest.raises(MetadataError, match="closed"):
        await store.put("/k", b"")
    with pytest.raises(MetadataError, match="closed"):
        store.watch("/k", lambda note: None)


async def test_unopened_store_says_how_to_open(tmp_path):
    store = SqliteMetadataStore(tmp_path / "meta.db")
    with pytest.raises(MetadataError, match="open"):
        await store.get("/k")
    assert not (tmp_path / "meta.db").exists()


async def test_open_creates_parent_folders(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "a" / "b" / "meta.db")
    await store.close()
    assert (tmp_path / "a" / "b" / "meta.db").exists()


async def test_newer_schema_is_refused(tmp_path):
    import sqlite3

    path = tmp_path / "meta.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(MetadataError, match="schema 99"):
        await SqliteMetadataStore.open(path)
    store = await SqliteMetadataStore.open(tmp_path / "other.db")  # a failed open leaves nothing behind
    await store.close()


async def test_wal_and_full_sync_are_on(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        def pragmas():
            conn = store._conn
            return (conn.execute("PRAGMA journal_mode").fetchone()[0],
                    conn.execute("PRAGMA synchronous").fetchone()[0])

        assert await store._run(pragmas) == ("wal", 2)  # 2 == FULL
    finally:
        await store.close()


async def test_sqlite_runs_off_the_event_loop_thread(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        worker = await store._run(threading.get_ident)
        assert worker != threading.get_ident()
        assert await store._run(threading.get_ident) == worker  # one dedicated thread
    finally:
        await store.close()


async def test_session_expires_when_keepalive_stalls(tmp_path, recorder, wait_until):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        session = await store.create_session(ttl_s=0.2)
        await store.put("/e", b"", session=session)
        seen = recorder()
        store.watch("/e", seen)

        time.sleep(0.4)  # the stimulus: a loop stall longer than the TTL

        assert not session.alive  # at once, before the keys are gone
        with pytest.raises(SessionExpired):
            await store.put("/e2", b"", session=session)
        assert await seen.next() == Notification(EventType.DELETED, "/e")
        assert await store.get("/e") is None
        assert await store.get("/e2") is None
    finally:
        await store.close()


async def test_session_stays_alive_while_loop_runs(tmp_path):
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        session = await store.create_session(ttl_s=0.25)
        await store.put("/e", b"", session=session)
        deadline = time.monotonic() + 0.75  # three TTLs of normal running
        while time.monotonic() < deadline:
            assert session.alive
            await asyncio.sleep(0.02)
        assert (await store.get("/e")).ephemeral
        await session.close()
        assert await store.get("/e") is None
    finally:
        await store.close()


async def test_cancelled_write_is_all_or_nothing_and_watchers_agree(tmp_path, recorder):
    # A write cancelled after it reached the worker's queue may or may not
    # happen; either way the store and its watchers tell the same story.
    store = await SqliteMetadataStore.open(tmp_path / "meta.db")
    try:
        seen = recorder()
        store.watch("/w", seen)
        task = asyncio.ensure_future(store.put("/w/a", b""))
        await asyncio.sleep(0)  # one loop turn: the put is handed to the worker
        task.cancel()
        await store.put("/w/z", b"")
        notes = [await seen.next()]
        if notes[0].key == "/w/a":
            notes.append(await seen.next())
        happened = await store.get("/w/a") is not None
        expected = [Notification(EventType.CREATED, "/w/a")] if happened else []
        assert notes == expected + [Notification(EventType.CREATED, "/w/z")]
    finally:
        await store.close()


# --- memory and sqlite agree on any sequence of operations -----------------

KEYS = ["/a", "/a/b", "/a/b/c", "/a/d", "/b"]
VERSIONS = st.sampled_from([None, -1, 0, 1, 2])
VALUES = st.binary(max_size=3)
OPS = st.one_of(
    st.tuples(st.just("put"), st.sampled_from(KEYS), VALUES, VERSIONS),
    st.tuples(st.just("session_put"), st.sampled_from(KEYS), VALUES, VERSIONS),
    st.tuples(st.just("delete"), st.sampled_from(KEYS), VERSIONS),
    st.tuples(st.just("increment"), st.sampled_from(KEYS), st.integers(1, 3)),
    st.tuples(st.just("new_session")),
)


async def _apply(store, root, ops):
    """Run ``ops`` under ``root``; return every outcome and the final state."""
    outcomes = []
    session = await store.create_session(ttl_s=60)
    for op in ops:
        kind, *args = op
        try:
            if kind == "put":
                key, value, version = args
                result = await store.put(root + key, value, version)
            elif kind == "session_put":
                key, value, version = args
                result = await store.put(root + key, value, version, session=session)
            elif kind == "delete":
                key, version = args
                result = await store.delete(root + key, version)
            elif kind == "increment":
                key, delta = args
                result = await store.increment(root + key, delta)
            else:
                await session.close()
                session = await store.create_session(ttl_s=60)
                result = None
            outcomes.append(("ok", result))
        except Exception as exc:  # the type is the outcome under comparison
            outcomes.append(("error", type(exc).__name__))
    state = {key: await store.get(root + key) for key in KEYS}
    tree = {key: await store.children(root + key) for key in ["", "/a", "/a/b"]}
    await session.close()
    after_close = {key: await store.get(root + key) for key in KEYS}
    return outcomes, state, tree, after_close


def test_sqlite_behaves_like_memory(tmp_path):
    with asyncio.Runner() as runner:
        memory = runner.run(MemoryMetadataStore.open())
        sqlite = runner.run(SqliteMetadataStore.open(tmp_path / "meta.db"))
        roots = itertools.count()

        @settings(max_examples=75, deadline=None)
        @given(ops=st.lists(OPS, max_size=30))
        def same_behaviour(ops):
            root = f"/run{next(roots)}"  # one store pair for all examples; a fresh subtree each
            expected = runner.run(_apply(memory, root, ops))
            assert runner.run(_apply(sqlite, root, ops)) == expected

        try:
            same_behaviour()
        finally:
            runner.run(memory.close())
            runner.run(sqlite.close())


async def test_cancelled_open_releases_the_file(tmp_path, wait_until):
    opening = asyncio.ensure_future(SqliteMetadataStore.open(tmp_path / "meta.db"))
    await asyncio.sleep(0)  # one loop turn: the open is handed to the worker
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening

    async def can_open() -> bool:
        try:
            store = await SqliteMetadataStore.open(tmp_path / "meta.db")
        except MetadataError:
            return False  # the abandoned open still holds it; it will let go
        await store.close()
        return True

    await wait_until(can_open)
