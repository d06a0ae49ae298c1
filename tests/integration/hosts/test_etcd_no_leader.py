"""The etcd store on a 3-member etcd whose member serving it is cut from its
peers (magnetar/metadata/etcd.py: every call requires a leader).

Three real etcd members, each on a host of its own (network namespaces,
magnetar_harness/hosts.py); the test's process reaches all three over the
bridge. The member holding the store's watch stream is cut from its two
peers both ways, not from the store: it loses its raft leader, the two
others go on. Without "hasleader" on the watch, that member keeps the stream
open and silent for the whole cut; with it, etcd ends the stream ("no
leader") and the store watches again on a member with a leader, from the
revision after the last it saw.

Root only (network namespaces): not root fails with one line, as the other
host tests (CI runs as root)."""
from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.request

import pytest

from magnetar.metadata.etcd import EtcdMetadataStore
from magnetar.metadata.etcd_server import find_etcd_binary
from magnetar.metadata.store import EventType, MetadataError
from magnetar_harness.hosts import HostBed, unavailable_reason
from magnetar_harness.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

MEMBERS = ["e1", "e2", "e3"]
CLIENT_PORT = 2379
PEER_PORT = 2380


@pytest.fixture
def members(tmp_path):
    """The bed with an etcd member started and healthy on each host."""
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the etcd member tests cannot run here: {reason}", pytrace=False)
    bed = HostBed(f"el{os.getpid() % 100000}", MEMBERS).setup()
    try:
        binary = find_etcd_binary()
        cluster = ",".join(f"{h}=http://{bed.address(h)}:{PEER_PORT}" for h in MEMBERS)
        for host in MEMBERS:
            address = bed.address(host)
            bed.start(host, host, [
                binary, "--name", host, "--data-dir", str(tmp_path / host),
                "--listen-client-urls", f"http://{address}:{CLIENT_PORT}",
                "--advertise-client-urls", f"http://{address}:{CLIENT_PORT}",
                "--listen-peer-urls", f"http://{address}:{PEER_PORT}",
                "--initial-advertise-peer-urls", f"http://{address}:{PEER_PORT}",
                "--initial-cluster", cluster, "--initial-cluster-token", bed.tag,
                "--initial-cluster-state", "new", "--log-level", "warn",
                # deploy/etcd.conf.yml's timing: a member without a leader ends
                # its streams after three election timeouts, 3-4 s.
                "--heartbeat-interval", "100", "--election-timeout", "1000",
            ], tmp_path / f"{host}.log", env={"GOMAXPROCS": "1"})
        for host in MEMBERS:
            wait_for(lambda h=host: _healthy(bed, h), 60, 0.2, f"etcd member {host} healthy")
        yield bed
    finally:
        bed.teardown()


def _get(bed: HostBed, host: str, path: str) -> str:
    with urllib.request.urlopen(f"http://{bed.address(host)}:{CLIENT_PORT}{path}", timeout=2) as answer:
        return answer.read().decode()


def _healthy(bed: HostBed, host: str) -> bool:
    try:
        return '"health":"true"' in _get(bed, host, "/health")
    except OSError:
        return False


def _watch_streams(bed: HostBed, host: str) -> int:
    """The watch streams ``host`` serves now (its etcd_debugging_mvcc_watch_stream_total gauge)."""
    for line in _get(bed, host, "/metrics").splitlines():
        if line.startswith("etcd_debugging_mvcc_watch_stream_total "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{host} reports no watch stream gauge")


def _open_streams(bed: HostBed, host: str, method: str) -> int:
    """The ``method`` streams (gRPC, e.g. LeaseKeepAlive) ``host`` serves now: started less handled."""
    started = handled = 0
    for line in _get(bed, host, "/metrics").splitlines():
        if f'grpc_method="{method}"' not in line:
            continue
        if line.startswith("grpc_server_started_total{"):
            started += int(float(line.split()[-1]))
        elif line.startswith("grpc_server_handled_total{"):
            handled += int(float(line.split()[-1]))
    return started - handled


def _url(bed: HostBed, hosts: list[str]) -> str:
    return "etcd://" + ",".join(f"{bed.address(h)}:{CLIENT_PORT}" for h in hosts) + "/cut"


async def _open(bed: HostBed, hosts: list[str]) -> EtcdMetadataStore:
    """The store on ``hosts``, given ``OPEN_TIMEOUT_S``. If it still cannot
    open: an AssertionError with what each member says (its watch streams,
    its log's tail), so that the next such failure names its cause."""
    try:
        return await EtcdMetadataStore.open(_url(bed, hosts), connect_timeout=OPEN_TIMEOUT_S)
    except MetadataError as exc:
        said = []
        for proc in bed.processes:
            try:
                streams = await asyncio.to_thread(_watch_streams, bed, proc.host)
            except (OSError, AssertionError) as why:
                streams = f"unknown ({why})"
            said.append(f"{proc.host}: alive {proc.alive}, watch streams {streams}, its log's tail:\n"
                        f"{proc.log_tail(15)}")
        raise AssertionError(f"{exc}\n" + "\n".join(said)) from None


async def _until(predicate, timeout: float, what: str) -> float:
    """Seconds until ``predicate()`` holds; AssertionError naming ``what`` after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        await asyncio.sleep(0.1)
    return time.monotonic() - start


async def _put(store: EtcdMetadataStore, key: str, value: bytes) -> None:
    """``store.put``, again while etcd times it out: a write made while the
    majority elects a new leader (the cut member led) may time out in etcd."""
    deadline = time.monotonic() + 30
    while True:
        try:
            await store.put(key, value)
            return
        except MetadataError:
            if time.monotonic() > deadline:
                raise


#: The store's open, here: it waits for its watch to be created, giving a
#: silent member up after 4.5 s for the next. At the default 10 s that is
#: two tries, and a CI run (2026-11-30, the whole suite on the other worker)
#: found the first two streams silent on a cluster just reported healthy;
#: the open is not what this test is about, so it allows the tries a
#: broker's restart would make.
OPEN_TIMEOUT_S = 30.0
HEARD_WITHIN_S = 15.0
#: Long enough to outlive the loss of the raft leader: the last renewal may be
#: TTL/3 old when the cut comes, the two others elect a new leader within two
#: election timeouts (2 s here), and a try on a member still waiting for the old
#: leader goes unanswered for TTL/6. At 4 s that left 0.1-0.7 s, and two CI
#: runs (2026-12-02) lost a session, each with the cut member as leader.
SESSION_TTL_S = 6.0


@pytest.mark.parametrize("fault", ["peers-cut", "isolated"])
async def test_a_watch_and_sessions_on_a_cut_member_move_to_a_member_with_a_leader(members, caplog, fault):
    """``peers-cut``: the member serving the store's watch and one of its
    keep-alives is cut from its two peers, not from the store. ``isolated``:
    cut from everything (its link down), so nothing it could say reaches
    the store. Either way, the store's watch hears a change made through
    the majority during the cut, its sessions live through three TTLs of
    it, and nothing is heard twice."""
    bed = members
    store = await _open(bed, MEMBERS)
    majority_writer = None
    try:
        seen: list[tuple[EventType, str]] = []
        store.watch("/bundles", lambda note: seen.append((note.type, note.key)))
        # The member serving the store's watch stream: the only stream yet.
        counts = {h: await asyncio.to_thread(_watch_streams, bed, h) for h in MEMBERS}
        assert sorted(counts.values()) == [0, 0, 1], counts
        victim = next(h for h in MEMBERS if counts[h] == 1)
        majority = [h for h in MEMBERS if h != victim]
        # Sessions until one's keep-alive stream is on the victim (round robin: within three).
        sessions = []
        while not await asyncio.to_thread(_open_streams, bed, victim, "LeaseKeepAlive"):
            assert len(sessions) < 6, "no keep-alive stream on the watch's member"
            sessions.append(await store.create_session(SESSION_TTL_S))
            await _until(lambda: sum(_open_streams(bed, h, "LeaseKeepAlive") for h in MEMBERS) == len(sessions),
                         10, "the new session's keep-alive stream")
        majority_writer = await _open(bed, majority)
        await _put(majority_writer, "/bundles/before", b"0")
        await _until(lambda: (EventType.CREATED, "/bundles/before") in seen, 10, "the change before the cut")

        with caplog.at_level(logging.INFO, logger="magnetar.metadata.etcd"):
            if fault == "peers-cut":
                for peer in majority:
                    bed.cut(victim, peer, both=True)
            else:
                bed.isolate(victim)
            cut_at = time.monotonic()
            # Written through the majority while the victim is cut off.
            await _put(majority_writer, "/bundles/during", b"1")
            # Within 15 s of the cut: a peer-cut member ends the stream 4-7 s
            # after it (an election timeout, then three without a leader); an
            # isolated one is given up after 4.5 s of silence, twice at worst
            # (round robin may pick it again), where gRPC's ping takes 5-15 s.
            await _until(lambda: (EventType.CREATED, "/bundles/during") in seen,
                         HEARD_WITHIN_S - (time.monotonic() - cut_at),
                         f"the store's watch to hear a change made through the majority while {victim} "
                         f"(serving it) was cut off ({fault})")
            took = time.monotonic() - cut_at
            said = "lost its raft leader" if fault == "peers-cut" else "silent for"
            assert any(said in r.getMessage() for r in caplog.records), caplog.text
            if fault == "peers-cut":
                # No stream of the store's left on the leaderless member.
                assert await asyncio.to_thread(_watch_streams, bed, victim) == 0
                # A write and a read through the store during the cut: a member
                # without a leader refuses them at once, the next serves them.
                await store.put("/bundles/by-store", b"2")
                assert (await store.get("/bundles/during")).value == b"1"
            # The sessions live on through three TTLs of the cut.
            while time.monotonic() - cut_at < 3 * SESSION_TTL_S:
                assert all(s.alive for s in sessions), [(s.id, s.alive) for s in sessions]
                await asyncio.sleep(0.2)
            print(f"{fault}: the watch heard the majority's change {took:.1f} s after {victim} was cut; "
                  f"{len(sessions)} sessions alive after {time.monotonic() - cut_at:.1f} s")
        bed.heal()
        await _put(majority_writer, "/bundles/after", b"3")
        await _until(lambda: (EventType.CREATED, "/bundles/after") in seen, 15, "the change after the heal")
        # Nothing heard twice: the watch resumed after the last revision it saw.
        assert len(seen) == len(set(seen)), seen
    finally:
        await store.close()
        if majority_writer is not None:
            await majority_writer.close()
