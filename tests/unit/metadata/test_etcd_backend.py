"""etcd-only behaviour, on real etcd server processes: lost sessions, racing
compare-and-sets from separate clients, watches across clients, an etcd
restart (clean and kill -9) under a store that keeps working."""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest

from magnetar.metadata import (
    BadVersion,
    EtcdMetadataStore,
    EventType,
    LeaderElection,
    Notification,
    Record,
    SessionExpired,
)
from magnetar.metadata.etcd_server import EtcdServer


@pytest.fixture
async def two_stores(etcd_url):
    """Two stores on one prefix: two connections, as two brokers would have."""
    one = await EtcdMetadataStore.open(etcd_url)
    two = await EtcdMetadataStore.open(etcd_url)
    try:
        yield one, two
    finally:
        await one.close()
        await two.close()


@pytest.fixture
def own_server(tmp_path):
    """An etcd server of this test's own, for tests that stop, pause or kill it."""
    server = EtcdServer(tmp_path / "etcd").start()
    try:
        yield server
    finally:
        if server.running:
            server.resume()  # harmless if not paused; a stopped process cannot take SIGTERM
        server.stop()


def ended_recorder(session):
    """Record when the session's end hook ran."""
    ended: list[float] = []
    session.on_end(lambda s: ended.append(time.monotonic()))
    return ended


# --- lost sessions --------------------------------------------------------


async def test_lease_expiry_during_a_stall_fires_the_hook_and_drops_the_keys(two_stores, wait_until):
    store, observer = two_stores
    session = await store.create_session(ttl_s=1)  # etcd grants at least 2 s
    ended = ended_recorder(session)
    await store.put("/owners/bundle-1", b"me", -1, session=session)
    gone = asyncio.Event()
    observer.watch("/owners", lambda note: note.type is EventType.DELETED and gone.set())

    # A long GC pause or a blocked event loop: no keep-alive goes out for
    # longer than the lease's TTL.
    time.sleep(session.ttl_s + 1.0)

    assert not session.alive  # known without waiting for any answer
    await asyncio.wait_for(session.wait_ended(), 2)
    assert ended and session.expired
    await asyncio.wait_for(gone.wait(), 5)
    assert await observer.get("/owners/bundle-1") is None
    with pytest.raises(SessionExpired):
        await store.put("/owners/bundle-1", b"me", session=session)
    assert await observer.get("/owners/bundle-1") is None


async def test_hung_etcd_loses_the_session_at_its_deadline(own_server, wait_until):
    store = await EtcdMetadataStore.open(own_server.store_url("hung"))
    try:
        session = await store.create_session(ttl_s=2)
        ended = ended_recorder(session)
        election = LeaderElection(store, "/leader", b"broker-1", session)
        assert await election.try_acquire()
        await store.put("/owners/b", b"me", session=session)

        own_server.pause()  # sockets stay open, nothing is answered
        paused_at = time.monotonic()
        await asyncio.wait_for(session.wait_ended(), session.ttl_s + 2)
        # Reported by the local deadline, without waiting for etcd: no later
        # than one TTL after the pause (plus scheduling slack).
        assert ended[0] - paused_at <= session.ttl_s + 0.5
        assert session.expired and not session.alive
        assert not election.is_leader
        await asyncio.wait_for(election.wait_lost(), 1)

        own_server.resume()
        # etcd expires (or our revoke removes) the lease: the keys go.
        await wait_until(lambda: _gone(store, "/owners/b", "/leader"), timeout=10)
    finally:
        await store.close()


async def _gone(store, *keys):
    return all([await store.get(k) is None for k in keys])


async def test_lease_revoked_by_another_client_is_a_lost_session(etcd_server, two_stores):
    store, _ = two_stores
    session = await store.create_session(ttl_s=3)
    await store.put("/e", b"", session=session)
    etcdctl = str(Path(sys.executable).parent / "etcdctl")
    subprocess.run(
        [etcdctl, "--endpoints", etcd_server.client_url, "lease", "revoke", f"{session.lease_id:x}"],
        check=True,
        capture_output=True,
    )
    # The next keep-alive (every TTL/3) hears that the lease is gone.
    await asyncio.wait_for(session.wait_ended(), session.ttl_s / 3 + 5)
    assert session.expired
    assert await store.get("/e") is None


async def test_close_is_not_a_loss(two_stores):
    store, _ = two_stores
    session = await store.create_session(ttl_s=30)
    ended = ended_recorder(session)
    await session.close()
    await asyncio.wait_for(session.wait_ended(), 1)
    await asyncio.sleep(0)  # the callback runs on the next loop turn
    assert ended and not session.expired


class _LostCancel(asyncio.Future):
    """Done when ``task`` is; its cancel() reaches nothing, as a cancel
    that Python 3.11's ``wait_for`` swallowed."""

    def __init__(self, task: asyncio.Task) -> None:
        super().__init__()
        task.add_done_callback(lambda t: self.done() or self.set_result(None))

    def cancel(self, msg=None) -> bool:
        return False


async def test_close_ends_the_watch_even_if_its_task_never_sees_the_cancel(etcd_url):
    """Python 3.11's wait_for loses a cancel that arrives in the pass its
    read completes in: the watch task then read on while changes kept
    coming, and close() (so a broker's clean stop) waited until etcd
    ended the stream (minutes, in a rolling restart under load). Here the
    cancel is lost every time: close must end the watch all the same."""
    store = await EtcdMetadataStore.open(etcd_url)
    writer = await EtcdMetadataStore.open(etcd_url)
    seen: list[Notification] = []
    store.watch("/w", seen.append)
    writing = True

    async def write() -> None:
        k = 0
        while writing:
            await writer.put(f"/w/{k}", b"v", -1)
            k += 1

    writes = asyncio.create_task(write())
    try:
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert seen, "the watch saw no change"
        store._watch_task = _LostCancel(store._watch_task)  # the cancel 3.11's wait_for can lose
        closing = asyncio.ensure_future(store.close())
        done, _ = await asyncio.wait({closing}, timeout=3)
        assert done, "close() still waits on the watch while changes stream in"
        closing.result()
    finally:
        writing = False
        await writes
        await writer.close()


async def test_session_survives_well_past_its_ttl_with_keepalive(two_stores, wait_until):
    store, observer = two_stores
    session = await store.create_session(ttl_s=2)
    await store.put("/e", b"", session=session)
    until = time.monotonic() + 3 * session.ttl_s
    while time.monotonic() < until:  # poll the key for three TTLs; it must stay
        assert (await observer.get("/e")).ephemeral
        await asyncio.sleep(0.2)
    assert session.alive
    await session.close()


# --- compare-and-set across clients ---------------------------------------


async def test_racing_cas_from_two_clients_has_one_winner(two_stores):
    one, two = two_stores
    await one.put("/bundle", b"free", -1)
    for version in range(30):

        async def attempt(store, value):
            try:
                await store.put("/bundle", value, version)
                return value
            except BadVersion:
                return None

        results = await asyncio.gather(attempt(one, b"one"), attempt(two, b"two"))
        winners = [r for r in results if r is not None]
        assert len(winners) == 1
        assert await two.get("/bundle") == Record("/bundle", winners[0], version + 1, False)


async def test_racing_creates_from_two_clients_have_one_winner(two_stores):
    one, two = two_stores
    for i in range(20):
        key = f"/k{i}"
        results = await asyncio.gather(
            one.put(key, b"one", -1), two.put(key, b"two", -1), return_exceptions=True
        )
        assert sorted(type(r).__name__ for r in results) == ["BadVersion", "int"]


async def test_counters_from_two_clients_never_repeat(two_stores):
    one, two = two_stores
    values = await asyncio.gather(*(s.increment("/ids") for _ in range(20) for s in (one, two)))
    assert sorted(values) == list(range(1, 41))


# --- watches across clients -----------------------------------------------


async def test_watch_sees_puts_and_deletes_of_another_client(two_stores, recorder):
    writer, watcher = two_stores
    seen = recorder()
    watcher.watch("/w", seen)
    # Another client's writes are in flight as the watch starts; wait for a
    # marker to be sure the watch is past them, then check what follows.
    await writer.put("/w/marker", b"")
    assert await seen.next() == Notification(EventType.CREATED, "/w/marker")
    session = await writer.create_session(ttl_s=30)
    await writer.put("/w/a", b"1")
    await writer.put("/w/a", b"2")
    await writer.put("/w/e", b"", session=session)
    await writer.delete("/w/a")
    await session.close()
    await writer.put("/elsewhere", b"")
    assert [await seen.next() for _ in range(5)] == [
        Notification(EventType.CREATED, "/w/a"),
        Notification(EventType.MODIFIED, "/w/a"),
        Notification(EventType.CREATED, "/w/e"),
        Notification(EventType.DELETED, "/w/a"),
        Notification(EventType.DELETED, "/w/e"),  # the revoked lease took it
    ]
    await writer.put("/w/last", b"")
    assert await seen.next() == Notification(EventType.CREATED, "/w/last")
    assert seen.pending() == []


# --- unwatched roots ----------------------------------------------------------


def test_the_watched_ranges_leave_out_each_unwatched_root_and_only_it():
    from magnetar.metadata.etcd import watched_ranges

    assert watched_ranges(b"/p/k/", []) == [(b"/p/k/", b"/p/k0")]
    assert watched_ranges(b"/p/k/", [b"/p/k/o/", b"/p/k/b/"]) == [
        (b"/p/k/", b"/p/k/b/"), (b"/p/k/b0", b"/p/k/o/"), (b"/p/k/o0", b"/p/k0"),
    ]


async def test_etcd_does_not_stream_an_unwatched_root_and_each_side_resumes_on_its_own(own_server, recorder, caplog):
    """Changes under an unwatched root never reach the store (etcd does not
    send them: the store watches the ranges on either side), and after an
    etcd restart each side resumes from its own last event: nothing missed,
    nothing repeated, although the busy side is far ahead of the quiet one."""
    url = own_server.store_url("unwatched")
    store = await EtcdMetadataStore.open(url, unwatched=("/object-ledgers",))
    writer = await EtcdMetadataStore.open(url)
    try:
        with pytest.raises(ValueError, match="not watched"):
            store.watch("/object-ledgers/1", lambda note: None)
        streamed: list[str] = []
        dispatch = store._watches.dispatch
        store._watches.dispatch = lambda loop, notes, revision=None: (
            streamed.extend(n.key for n in notes), dispatch(loop, notes, revision))
        seen = recorder()
        store.watch("/", seen)
        await writer.put("/a/1", b"")  # below the root
        await writer.put("/z/1", b"")  # above it
        for i in range(50):
            await writer.put(f"/object-ledgers/{i:020d}", b"x" * 100)
        await writer.put("/a/2", b"")
        assert [await seen.next() for _ in range(3)] == [
            Notification(EventType.CREATED, "/a/1"),
            Notification(EventType.CREATED, "/z/1"),
            Notification(EventType.CREATED, "/a/2"),
        ]
        own_server.kill()
        own_server.start()
        await writer.put("/z/2", b"")
        await writer.put("/a/3", b"")
        assert sorted([await seen.next(timeout=10) for _ in range(2)], key=lambda n: n.key) == [
            Notification(EventType.CREATED, "/a/3"),
            Notification(EventType.CREATED, "/z/2"),
        ]
        await writer.put("/a/last", b"")
        assert await seen.next() == Notification(EventType.CREATED, "/a/last")
        assert seen.pending() == []
        assert not any(key.startswith("/object-ledgers") for key in streamed)
    finally:
        await store.close()
        await writer.close()


async def test_progress_notices_keep_a_quiet_range_resumable_past_a_compaction(tmp_path, recorder, wait_until, caplog):
    """A range with no change for a long time resumes from the revision of
    etcd's last progress notice, not of its last event: history compacted
    meanwhile loses nothing."""
    from aetcd import rpc

    server = EtcdServer(tmp_path / "etcd", watch_progress_interval_s=0.5).start()
    store = writer = None
    try:
        url = server.store_url("quiet")
        store = await EtcdMetadataStore.open(url, unwatched=("/object-ledgers",))
        writer = await EtcdMetadataStore.open(url)
        seen = recorder()
        store.watch("/z", seen)
        await writer.put("/z/1", b"")
        assert await seen.next() == Notification(EventType.CREATED, "/z/1")
        quiet_from = store._watch_from[-1]
        for i in range(20):
            await writer.put(f"/a/{i}", b"")  # only the other range changes
        latest = (await writer._call(writer._kv.Range, rpc.RangeRequest(key=b"/", count_only=True),
                                     idempotent=True)).header.revision
        await wait_until(lambda: store._watch_from[-1] > latest, timeout=10)
        assert quiet_from <= latest
        await writer._call(writer._kv.Compact, rpc.CompactionRequest(revision=latest, physical=True),
                           idempotent=True)
        server.kill()
        server.start()
        await writer.put("/z/2", b"")
        assert await seen.next(timeout=10) == Notification(EventType.CREATED, "/z/2")
        assert "compacted" not in caplog.text
    finally:
        for s in (store, writer):
            if s is not None:
                await s.close()
        server.stop()


# --- etcd restarts ----------------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_store_keeps_working_across_an_etcd_restart(own_server, recorder, wait_until, how):
    store = await EtcdMetadataStore.open(own_server.store_url("restart"))
    try:
        session = await store.create_session(ttl_s=5)
        await store.put("/ledgers/1", b"L1", -1)
        await store.put("/ledgers/1", b"L1'", 0)
        await store.put("/owners/b", b"me", -1, session=session)
        assert await store.increment("/ids", 5) == 5
        seen = recorder()
        store.watch("/ledgers", seen)

        if how == "stop":
            own_server.stop()  # SIGTERM
        else:
            own_server.kill()  # a crash: everything answered was fsynced
        down_at = time.monotonic()
        own_server.start()  # same data dir, same ports

        # Reads wait for the reconnect (within the store's op timeout).
        assert await store.get("/ledgers/1") == Record("/ledgers/1", b"L1'", 1, False)
        print(f"etcd {how}+start: store answered again {time.monotonic() - down_at:.2f} s after the stop")
        assert (await store.get("/owners/b")).ephemeral
        assert await store.increment("/ids") == 6
        assert await store.put("/ledgers/1", b"L1''", 1) == 2
        assert await store.children("/ledgers") == ["1"]
        # The watch stream resumed: it hears of the write made after the restart.
        assert await seen.next(timeout=10) == Notification(EventType.MODIFIED, "/ledgers/1")
        # The lease outlived a restart shorter than its TTL, and is kept alive.
        assert session.alive and not session.expired
        until = time.monotonic() + session.ttl_s * 1.5
        while time.monotonic() < until:
            assert (await store.get("/owners/b")) is not None, "lease expired after the restart"
            await asyncio.sleep(0.5)
        assert session.alive
        await session.close()
        assert await store.get("/owners/b") is None
    finally:
        await store.close()


def _unread_bytes(port: int) -> int:
    """Bytes waiting in the receive queues of the sockets listening or
    accepted on local ``port`` (``/proc/net/tcp``): what a paused server
    has been sent and not read."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                total += int(fields[4].split(":")[1], 16)
    return total


async def test_a_session_asked_for_as_its_connection_breaks_is_granted_once_etcd_is_back(own_server, wait_until):
    """A LeaseGrant whose connection breaks before its answer is sent again,
    not failed as a write of unknown outcome: a grant that landed is a lease
    nothing is attached to, which etcd drops after its TTL. (On a 3-member
    etcd the retry goes to the next member; CI once failed a host test on a
    member's connection timing out under a LeaseGrant.)"""
    port = int(own_server.client_url.rsplit(":", 1)[1])
    store = await EtcdMetadataStore.open(own_server.store_url("grant"), op_timeout=20.0)
    try:
        assert await store.get("/k") is None  # connected
        own_server.pause()
        asked = asyncio.ensure_future(store.create_session(ttl_s=5))
        # The grant is in the paused server's socket, unanswered (a keep-alive
        # ping is 17 bytes; a call's headers and message are more).
        await wait_until(lambda: _unread_bytes(port) > 60, timeout=10, what="the grant in the paused server's socket")
        assert not asked.done()
        own_server.kill()  # its sockets reset under the call
        own_server.start()  # same data, same port
        session = await asyncio.wait_for(asked, 25)
        assert session.alive
        await store.put("/owners/x", b"me", -1, session=session)
        await session.close()
        assert await store.get("/owners/x") is None
    finally:
        await store.close()


async def test_writes_while_etcd_is_down_fail_clearly(own_server):
    from magnetar.metadata import MetadataError

    store = await EtcdMetadataStore.open(own_server.store_url("down"), op_timeout=1.0)
    try:
        own_server.stop()
        with pytest.raises(MetadataError, match="unreachable"):
            await store.put("/k", b"")
        with pytest.raises(MetadataError, match="unreachable"):
            await store.get("/k")
        own_server.start()
        assert await store.get("/k") is None  # etcd was down: the put never reached it
        await store.put("/k", b"after")
        assert (await store.get("/k")).value == b"after"
    finally:
        await store.close()


async def test_a_page_of_records_over_grpc_s_message_size_is_read_in_parts(two_stores):
    """Eight records of 1 MiB are twice what one gRPC answer carries (4 MiB):
    the page comes back whole, read in smaller ranges."""
    store, _ = two_stores
    value = b"v" * (1024 * 1024)
    for i in range(8):
        await store.put(f"/big/{i:02d}", value + bytes([i]))
    page = await store.children_records("/big", "", 8)
    assert [r.key for r in page] == [f"/big/{i:02d}" for i in range(8)]
    assert all(r.value == value + bytes([i]) for i, r in enumerate(page))


async def test_keys_below_pages_past_the_channel_s_message_size(etcd_url, monkeypatch):
    """The object ledgers' index of 10,000 topics keeping a few ledgers each
    is more keys than one gRPC answer may carry (4 MiB): keys_below pages,
    and halves its page while an answer is too large. Here the channel takes
    8 KiB; 400 keys are ~20 KiB."""
    from magnetar.metadata import etcd

    monkeypatch.setattr(etcd, "_CHANNEL_OPTIONS", etcd._CHANNEL_OPTIONS + [("grpc.max_receive_message_length", 8192)])
    store = await EtcdMetadataStore.open(etcd_url)
    try:
        names = [f"{i:020d}/compacted" for i in range(400)]
        await asyncio.gather(*(store.put(f"/big/{name}", b"") for name in names))
        await store.put("/bigger/not-below", b"")
        assert await store.keys_below("/big") == sorted(names)
        monkeypatch.setattr(etcd, "KEYS_PER_RANGE", 7)  # pages that end inside a ledger's keys
        assert await store.keys_below("/big") == sorted(names)
    finally:
        await store.close()
