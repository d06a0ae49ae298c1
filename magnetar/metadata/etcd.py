"""MetadataStore on an etcd v3 server, shared by the brokers of a cluster.

Open with ``store = await EtcdMetadataStore.open("etcd://HOST:PORT/PREFIX")``
(or :func:`magnetar.metadata.open_store`). Every key lives under PREFIX, so
clusters, tests and tools can share one etcd server:
``<PREFIX>/k<key>`` holds the key ``<key>``, ``<PREFIX>/c<key>`` the counter
``<key>`` (the contract keeps counters apart from keys). Without a PREFIX the
keys start at ``/k``.

Client: aetcd 1.0 (the maintained asyncio etcd client; it needs grpcio and
protobuf within our pins and works with them). We use its generated etcd v3
API (``aetcd.rpc``: messages and stubs on a ``grpc.aio`` channel) and drive the
watch and lease keep-alive streams ourselves, because the store must resume a
watch from the last revision it saw after etcd restarts, and must call a
session lost the moment its TTL runs out without a keep-alive answer; aetcd's
own watcher and lease helpers do neither.

Versions: etcd's per-key ``version`` is 1 at creation, +1 per put and starts
again after a delete; the contract's version is that minus one. A
compare-and-set is one etcd transaction comparing ``version`` (``== 0`` for
"must not exist"); on failure the same transaction reads the key, so
KeyNotFound and BadVersion are told apart without a race.

Sessions are leases: ``create_session(ttl_s)`` grants one (etcd rounds the
TTL up to whole seconds, and to its minimum, 2 s with default settings;
``session.ttl_s`` is what was granted) and a task sends a keep-alive every
TTL/3 on a lease stream that reconnects by itself, and also when an answer
does not come within TTL/6 (at least 0.5 s: its member lost its leader or is
out of reach; the new stream goes to the next member, on a channel to that
member alone, since the store's round robin may pick the bad one again). Ephemeral keys carry the
lease, so etcd deletes them when it ends. The session is *lost* (``alive``
turns False, ``on_end`` callbacks run, ``expired`` is True) as soon as the
local deadline passes, i.e. TTL after the last keep-alive etcd answered was
sent, or etcd answers that the lease is gone. The local deadline is never
later than etcd's, so a broker stops before another can take over. After a
loss the store revokes the lease when it can, so its keys go at once.

Watches: one etcd watch stream, started at open, carries a watch per key
range of the prefix (one range, or the ranges left between the store's
unwatched roots, which etcd then never sends). Its events are mapped to
created (etcd version 1), modified and deleted notifications and fanned out to
the registered watches. When the stream breaks (etcd restarted) each range is
watched again from the revision after the last event or progress notice it
had, so nothing is missed or repeated. Progress notices (etcd sends one per
quiet watch every 10 minutes by default) keep a quiet range's resume revision
within etcd's history, which we keep for an hour. Events of one range arrive in
commit order; a watch whose prefix spans an unwatched root (``/``) may hear
the two sides' changes interleaved out of order while a resumed stream catches
up. A watch registered after some write was answered never hears of that write
(each watch remembers the highest revision this store had been answered when
it was added).

A member cut from its peers loses its raft leader while the others go on.
Every call and stream asks for a member with a leader (gRPC metadata
``hasleader``, as etcd's own client does on its watches and keep-alives), so
such a member refuses it at once ("etcdserver: no leader", retried on the
next member: round-robin over several endpoints) and ends the watch and
keep-alive streams it holds after three election timeouts (about 3-4 s with
etcd's 1 s default); the watch is then opened again on a member with a
leader, from the revision after the last it saw, and a warning says so. A
member out of reach altogether (isolated) is noticed by the watch's own
probe: a progress request every 1.5 s, and the stream given up after 4.5 s
without any answer, rather than when gRPC's ping times out (5-15 s later).

Counters: a decimal value under ``<PREFIX>/c<key>``, raised by a transaction
that compares ``mod_revision`` and retries; increments from one store are
queued per key so only other processes cause retries.

Failure modes: :class:`MetadataError` when etcd does not answer within
``op_timeout`` (a write may or may not have happened then: only reads, and
writes a member refused for want of a leader, are retried), or answers an
error; ``SessionExpired`` for writes under a lost session, including one
etcd has already dropped. ``open`` raises
MetadataError if etcd cannot be reached within ``connect_timeout``.
"""
from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from typing import Any, Callable
from urllib.parse import urlsplit

import grpc
from aetcd import rpc

from ._watches import WatchRegistry
from .store import (
    BadVersion,
    EventType,
    MetadataError,
    MetadataStore,
    KeyNotFound,
    Notification,
    Record,
    MetadataSession,
    SessionExpired,
    Watch,
    MAX_TRANSACTION_OPS,
    Put,
    TransactionFailed,
    check_delta,
    check_transaction,
    check_expected_version,
    check_key,
    check_value,
)

log = logging.getLogger(__name__)

# Reconnect fast after an etcd restart (gRPC's default backoff grows to
# minutes); ping an idle connection so a dead peer is noticed. etcd refuses
# pings more often than every 5 s.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
]

_UNREACHABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

#: gRPC metadata asking the member to serve a call only while it has a raft
#: leader (etcd's clientv3 sends it on its watch and keep-alive streams:
#: ``WithRequireLeader``). A member without one refuses the call at once
#: (UNAVAILABLE "etcdserver: no leader", before running it), and ends a
#: stream already open after three election timeouts without one. Without
#: it, a member cut from its peers keeps a watch open and silent for the
#: whole cut, and a read waits there for a ReadIndex that never comes.
_REQUIRE_LEADER = (("hasleader", "true"),)
_NO_LEADER = "etcdserver: no leader"


#: The watch stream asks etcd for progress this often; a stream that brings
#: nothing (not even that answer) for _WATCH_SILENCE_S is given up.
_WATCH_PROBE_S = 1.5
_WATCH_SILENCE_S = 4.5
#: The watch id of etcd's answer to a progress request (it is for every watch of the stream).
_PROGRESS_ANSWER = -1
#: How long close() waits for the watch loop to end before closing the channel under it.
_WATCH_CLOSE_S = 5.0


def _no_leader(exc: grpc.aio.AioRpcError) -> bool:
    """True if the member refused or ended the call for having no raft leader."""
    return exc.code() == grpc.StatusCode.UNAVAILABLE and _NO_LEADER in (exc.details() or "")


def parse_etcd_endpoints(url: str) -> tuple[list[tuple[str, int]], str]:
    """``etcd://HOST:PORT[,HOST:PORT...]/PREFIX`` -> ([(host, port), ...],
    "/PREFIX" or ""): the members of one etcd cluster, in the order given.
    ValueError if malformed."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "etcd":
        raise ValueError(f"bad metadata store URL {url!r}: not an etcd:// URL")
    endpoints = []
    for member in parts.netloc.split(","):
        try:
            one = urlsplit(f"etcd://{member}")
            host, port = one.hostname, one.port
        except ValueError:
            host, port, one = None, None, None
        if not host or port is None or one.username or one.password:
            raise ValueError(f"bad metadata store URL {url!r}: expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")
        endpoints.append((host, port))
    if parts.query or parts.fragment:
        raise ValueError(f"bad metadata store URL {url!r}: expected etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")
    prefix = parts.path.strip("/")
    if prefix and ("//" in prefix or "\x00" in prefix):
        raise ValueError(f"bad metadata store URL {url!r}: the prefix has an empty segment")
    return endpoints, ("/" + prefix if prefix else "")


def parse_etcd_url(url: str) -> tuple[str, int, str]:
    """``etcd://HOST:PORT/PREFIX`` -> (host, port, "/PREFIX" or ""): the
    first member of :func:`parse_etcd_endpoints`. ValueError if malformed."""
    endpoints, prefix = parse_etcd_endpoints(url)
    return endpoints[0][0], endpoints[0][1], prefix


def member_addresses(endpoints: list[tuple[str, int]]) -> tuple[str, list[str]]:
    """The gRPC address scheme (``ipv4`` or ``ipv6``) and each member's
    address (``ip:port``, ``[ip]:port``), resolved now, in ``endpoints``'
    order. OSError if a name does not resolve or the names resolve to both
    families."""
    addresses = []
    for host, port in endpoints:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        ip = info[4][0]
        addresses.append((info[0], f"[{ip}]:{port}" if info[0] == socket.AF_INET6 else f"{ip}:{port}"))
    families = {family for family, _ in addresses}
    if len(families) > 1:
        raise OSError("the etcd members resolve to both IPv4 and IPv6 addresses: give one family")
    return ("ipv6" if families == {socket.AF_INET6} else "ipv4"), [a for _, a in addresses]


def grpc_target(endpoints: list[tuple[str, int]],
                members: tuple[str, list[str]] | None = None) -> tuple[str, list[tuple[str, Any]]]:
    """The gRPC target and extra channel options for ``endpoints``. One
    member: ``host:port`` (gRPC resolves the name, again at each
    reconnect). Several: their addresses (``members``, what
    :func:`member_addresses` gave, or resolved now: gRPC has no resolver
    for a list of names), with round-robin balancing, so a call retried
    after a member went away or lost its quorum goes to another member.
    OSError if a name does not resolve."""
    if len(endpoints) == 1:
        host, port = endpoints[0]
        return f"{host}:{port}", []
    scheme, addresses = members if members is not None else member_addresses(endpoints)
    return f"{scheme}:" + ",".join(addresses), [("grpc.lb_policy_name", "round_robin")]


def _range_end(prefix: bytes) -> bytes:
    """The end of the key range holding every key that starts with ``prefix``."""
    end = bytearray(prefix)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[: i + 1])
    return b"\x00"  # all-0xff prefix: to the end of the key space


def watched_ranges(low: bytes, unwatched: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The ranges ``[key, end)`` of the keys starting with ``low``, less every key
    under one of ``unwatched`` (full etcd keys ending in "/"). A root's own key
    stays inside a range: the registry drops its changes."""
    cuts = sorted((root, _range_end(root)) for root in unwatched)
    ranges, start, end = [], low, _range_end(low)
    for cut_start, cut_end in cuts:
        if cut_start > start:
            ranges.append((start, min(cut_start, end)))
        start = max(start, cut_end)
    if start < end:
        ranges.append((start, end))
    return ranges


class EtcdSession(MetadataSession):
    """A lease of an :class:`EtcdMetadataStore`; see the module docstring."""

    def __init__(self, store: "EtcdMetadataStore", lease_id: int, ttl_s: int, granted_at: float) -> None:
        super().__init__()
        self.id = f"etcd-lease-{lease_id:x}"
        self.lease_id = lease_id
        self.ttl_s = ttl_s
        self._store = store
        self._deadline = granted_at + ttl_s
        self._finished = False
        self._keepalive: asyncio.Task[None] | None = None
        self._ending: asyncio.Task[None] | None = None
        #: Which member the keep-alive stream goes to (store.keepalive_stub): the next one after each broken stream.
        self.keepalive_turn = store._first_keepalive_turn()

    @property
    def alive(self) -> bool:
        # The deadline counts even before the keep-alive task notices: a
        # process waking from a long stall never trusts a lapsed lease.
        return not self._finished and time.monotonic() < self._deadline

    def _start(self) -> None:
        self._keepalive = asyncio.get_running_loop().create_task(self._keep_alive(), name=f"keepalive {self.id}")

    async def _write_then_read(self, call: Any) -> Any:
        await call.write(rpc.LeaseKeepAliveRequest(ID=self.lease_id))
        return await call.read()

    async def _keep_alive(self) -> None:
        interval = self.ttl_s / 3
        # How long an answer may take on one stream (see below): short enough
        # for three more streams before the deadline (each on the next member:
        # with three, one of them has a leader), long enough for a busy etcd.
        answer_within = min(interval, max(self.ttl_s / 6, 0.5))
        # While the members elect a leader, each refuses at once ("no
        # leader"): a pause grown to a second would sleep through the first
        # moments a new leader can renew, which a short TTL may not have.
        longest_pause = min(1.0, answer_within / 2)
        backoff = 0.05
        while True:
            call = None
            try:
                # Leader required: a member cut from its peers ends the stream
                # (it cannot renew the lease there) and the next one goes to another.
                stub = self._store.keepalive_stub(self.keepalive_turn)
                call = stub.LeaseKeepAlive(wait_for_ready=True, metadata=_REQUIRE_LEADER)
                while True:
                    sent = time.monotonic()
                    if sent >= self._deadline:
                        break  # stalled past the deadline: lost, whatever etcd says now
                    # An answer takes milliseconds. None within TTL/6: this
                    # member cannot renew (no leader yet to forward to, or
                    # out of reach), and waiting for etcd to end the stream
                    # (3-4 s after it lost its leader) or for gRPC's ping
                    # timeout would outlast a short TTL. A new stream goes to
                    # the next member, with time left to renew there. The
                    # write counts too: on a member out of reach since before
                    # the stream began it waits for a connection that never comes.
                    wait = min(self._deadline - sent, answer_within)
                    try:
                        answer = await asyncio.wait_for(self._write_then_read(call), max(0.0, wait))
                    except TimeoutError:
                        if time.monotonic() < self._deadline:
                            log.info("keep-alive of %s unanswered for %.1f s: renewing on a new stream "
                                     "(the next etcd member)", self.id, wait)
                        raise
                    if answer is grpc.aio.EOF:
                        break
                    if answer.TTL <= 0:
                        self._lose("etcd says the lease is gone (expired or revoked)")
                        return
                    self._deadline = sent + answer.TTL
                    backoff = 0.05
                    await asyncio.sleep(interval)
            except Exception as exc:  # RPC errors, timeouts, writes on a broken stream: all mean reconnect
                log.debug("keep-alive stream of %s broke: %r", self.id, exc)
            finally:
                if call is not None:
                    call.cancel()
            self.keepalive_turn += 1
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self._lose(f"no keep-alive answer from etcd within the {self.ttl_s} s TTL")
                return
            await asyncio.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, longest_pause)

    def _lose(self, reason: str) -> None:
        """The session is lost: report it now, then revoke the lease when etcd answers."""
        if self._finished:
            return
        log.warning("metadata session %s lost: %s", self.id, reason)
        self._finished = True
        self._deadline = 0.0
        if self._keepalive is not None and self._keepalive is not asyncio.current_task():
            self._keepalive.cancel()
        self._mark_ended(expired=True)
        # The lease may outlive our deadline on the server; revoking it makes
        # the ephemeral keys go now rather than when etcd's TTL runs out.
        self._ending = asyncio.get_running_loop().create_task(self._store._end_session(self, best_effort=True))

    async def close(self) -> None:
        """Revoke the lease, deleting its ephemeral keys. Idempotent.

        If etcd cannot be reached, the keys go when the lease's TTL runs out.
        """
        if self._ending is None:
            self._finished = True
            if self._keepalive is not None:
                self._keepalive.cancel()
            self._mark_ended(expired=False)
            self._ending = asyncio.get_running_loop().create_task(self._store._end_session(self, best_effort=False))
        await asyncio.shield(self._ending)


class EtcdMetadataStore(MetadataStore):
    """MetadataStore on etcd v3; see the module docstring."""

    def __init__(self, host: str, port: int, prefix: str = "", *, op_timeout: float = 10.0,
                 unwatched: tuple[str, ...] = ()) -> None:
        self.target = f"{host}:{port}"
        self.prefix = prefix
        self.op_timeout = op_timeout
        self._key_root = f"{prefix}/k".encode()
        self._counter_root = f"{prefix}/c".encode()
        self._channel: grpc.aio.Channel | None = None
        self._kv: Any = None
        self._lease_stub: Any = None
        self._watch_stub: Any = None
        #: With several members: each one's address, and (opened at first use)
        #: a channel to it alone for the sessions' keep-alive streams.
        self._member_targets: list[str] = []
        self._member_channels: dict[int, grpc.aio.Channel] = {}
        self._keepalive_turns = 0
        self._closed = False
        self._closing = asyncio.Event()
        self._watches = WatchRegistry(unwatched)
        self._sessions: dict[int, EtcdSession] = {}
        self._answered_revision = 0  # highest revision of any answer this store got
        #: The key ranges the watch stream covers, and the revision each resumes at.
        self._watch_ranges = watched_ranges(
            self._key_root + b"/", [self._key_root + root.encode() + b"/" for root in self._watches.unwatched]
        )
        self._watch_from = [0] * len(self._watch_ranges)
        self._watch_task: asyncio.Task[None] | None = None
        #: The watch stream now open (close() cancels it: its read ends at once).
        self._watch_call: Any = None
        self._counter_locks: dict[str, asyncio.Lock] = {}

    @classmethod
    async def open(cls, url: str, *, connect_timeout: float = 10.0, op_timeout: float = 10.0,
                   unwatched: tuple[str, ...] = ()) -> "EtcdMetadataStore":
        """Connect to ``etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`` (the
        members of one etcd cluster) and start the store's watch.

        Raises ValueError for a malformed URL or unwatched root, MetadataError
        if etcd does not answer within ``connect_timeout`` seconds.
        """
        endpoints, prefix = parse_etcd_endpoints(url)
        try:
            # Resolved once: the round robin and the keep-alives' members are the same addresses.
            members = member_addresses(endpoints) if len(endpoints) > 1 else None
            target, options = grpc_target(endpoints, members)
        except OSError as exc:
            raise MetadataError(f"etcd members of {url} do not resolve: {exc}") from None
        store = cls(endpoints[0][0], endpoints[0][1], prefix, op_timeout=op_timeout, unwatched=unwatched)
        if members is not None:
            store.target = ",".join(f"{host}:{port}" for host, port in endpoints)
            scheme, addresses = members
            store._member_targets = [f"{scheme}:{address}" for address in addresses]
        store._channel = rpc.insecure_channel(target, options=_CHANNEL_OPTIONS + options)
        store._kv = rpc.KVStub(store._channel)
        store._lease_stub = rpc.LeaseStub(store._channel)
        store._watch_stub = rpc.WatchStub(store._channel)
        try:
            first = rpc.RangeRequest(
                key=store._key_root + b"/", range_end=_range_end(store._key_root + b"/"), count_only=True
            )
            answer = await store._call(store._kv.Range, first, idempotent=True, timeout=connect_timeout)
            store._watch_from = [answer.header.revision + 1] * len(store._watch_ranges)
            created = asyncio.Event()
            store._watch_task = asyncio.get_running_loop().create_task(
                store._watch_loop(created), name=f"etcd watch {url}"
            )
            try:
                await asyncio.wait_for(created.wait(), connect_timeout)
            except TimeoutError:
                raise MetadataError(f"etcd at {store.target} did not open a watch within {connect_timeout} s") from None
        except BaseException:
            await store.close()
            raise
        return store

    # --- plumbing ------------------------------------------------------

    def _first_keepalive_turn(self) -> int:
        """Where a new session's keep-alives begin: the members in turn, so sessions spread."""
        self._keepalive_turns += 1
        return self._keepalive_turns - 1

    def keepalive_stub(self, turn: int) -> Any:
        """The lease stub a keep-alive stream opens on at ``turn``. With one
        member, the store's channel. With several, member ``turn`` modulo
        their number, on a channel to it alone: a session whose stream
        broke (its member lost its leader, or went out of reach and its
        connection still looks ready) must try another member next, which
        the store's round robin does not promise (every call of the store
        moves its turn; seen in a host test: three tries in a row, all on
        the leaderless side, and the session was lost)."""
        if not self._member_targets:
            return self._lease_stub
        member = turn % len(self._member_targets)
        channel = self._member_channels.get(member)
        if channel is None:
            channel = rpc.insecure_channel(self._member_targets[member], options=_CHANNEL_OPTIONS)
            self._member_channels[member] = channel
        return rpc.LeaseStub(channel)

    def _data_key(self, key: str) -> bytes:
        return self._key_root + key.encode()

    def _check_open(self) -> None:
        if self._closed:
            raise MetadataError(f"etcd metadata store {self.target}{self.prefix} is closed")

    async def _call(self, method: Any, request: Any, *, idempotent: bool, timeout: float | None = None) -> Any:
        """One unary RPC, with a deadline; reads (and a lease's grant, which
        nothing holds yet) are retried while etcd is unreachable."""
        self._check_open()
        deadline = time.monotonic() + (self.op_timeout if timeout is None else timeout)
        backoff = 0.05
        while True:
            remaining = deadline - time.monotonic()
            try:
                answer = await method(request, timeout=max(remaining, 0.001), wait_for_ready=True,
                                      metadata=_REQUIRE_LEADER)
            except grpc.aio.AioRpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.NOT_FOUND and "lease not found" in (exc.details() or ""):
                    raise _LeaseGone() from None
                if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise _TooLarge(f"etcd at {self.target} failed: {code.name} {exc.details()}") from None
                if code in _UNREACHABLE:
                    remaining = deadline - time.monotonic()
                    # "No leader" is the member's refusal before running the
                    # call (etcd's interceptor; a write never answers it
                    # otherwise): a write is retried as safely as a read, and
                    # round-robin sends the retry to the next member.
                    if (idempotent or _no_leader(exc)) and remaining > 0:
                        await asyncio.sleep(min(backoff, remaining))
                        backoff = min(backoff * 2, 0.5)
                        continue
                    outcome = "" if idempotent else " (the write may or may not have happened)"
                    raise MetadataError(f"etcd at {self.target} unreachable: {exc.details()}{outcome}") from None
                raise MetadataError(f"etcd at {self.target} failed: {code.name} {exc.details()}") from None
            if answer.header.revision > self._answered_revision:
                self._answered_revision = answer.header.revision
            return answer

    async def _txn(self, compare: list, success: list, failure: list, *, session: EtcdSession | None = None) -> Any:
        request = rpc.TxnRequest(compare=compare, success=success, failure=failure)
        try:
            return await self._call(self._kv.Txn, request, idempotent=False)
        except _LeaseGone:
            if session is not None:
                session._lose("etcd no longer knows its lease")
                raise SessionExpired(f"session {session.id} expired") from None
            raise MetadataError("etcd refused a lease this store did not give") from None

    @staticmethod
    def _version_is(key: bytes, version: int) -> Any:
        return rpc.Compare(result=rpc.Compare.EQUAL, target=rpc.Compare.VERSION, key=key, version=version)

    @staticmethod
    def _read_op(key: bytes) -> Any:
        return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))

    # --- contract ------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        check_key(key)
        answer = await self._call(self._kv.Range, rpc.RangeRequest(key=self._data_key(key)), idempotent=True)
        if not answer.kvs:
            return None
        kv = answer.kvs[0]
        return Record(key, bytes(kv.value), kv.version - 1, kv.lease != 0)

    async def put(self, key, value, expected_version=None, *, session=None) -> int:
        check_key(key)
        check_expected_version(expected_version)
        value = check_value(value)
        lease = 0
        if session is not None:
            if not isinstance(session, EtcdSession) or session._store is not self:
                raise ValueError(f"session {session.id} does not belong to this etcd store")
            if not session.alive:
                raise SessionExpired(f"session {session.id} is closed or expired")
            lease = session.lease_id
        k = self._data_key(key)
        compare = [] if expected_version is None else [self._version_is(k, expected_version + 1)]
        answer = await self._txn(
            compare,
            [rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value, lease=lease)), self._read_op(k)],
            [self._read_op(k)],
            session=session,
        )
        if answer.succeeded:
            return answer.responses[1].response_range.kvs[0].version - 1
        found = answer.responses[0].response_range.kvs
        if expected_version == -1:
            raise BadVersion(f"{key} exists (version {found[0].version - 1})")
        if not found:
            raise KeyNotFound(key)
        raise BadVersion(f"{key} is at version {found[0].version - 1}, not {expected_version}")

    async def delete(self, key, expected_version=None) -> None:
        check_key(key)
        check_expected_version(expected_version)
        k = self._data_key(key)
        if expected_version is None:
            condition = rpc.Compare(result=rpc.Compare.GREATER, target=rpc.Compare.VERSION, key=k, version=0)
        else:
            condition = self._version_is(k, expected_version + 1)
        answer = await self._txn(
            [condition], [rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k))], [self._read_op(k)]
        )
        if answer.succeeded:
            return
        found = answer.responses[0].response_range.kvs
        if not found:
            raise KeyNotFound(key)
        raise BadVersion(f"{key} is at version {found[0].version - 1}, not {expected_version}")

    async def transaction(self, compares, writes, *, versions: bool = True) -> list[int | None]:
        compares, writes = check_transaction(compares, writes)
        if not versions:  # no read-backs: one op per write
            await self._transaction_without_versions(compares, writes)
            return [None] * len(writes)
        conditions = [self._version_is(self._data_key(c.key), c.version + 1) for c in compares]
        ops = []
        for w in writes:
            k = self._data_key(w.key)
            if isinstance(w, Put):
                ops += [rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=bytes(w.value))), self._read_op(k)]
            else:
                ops.append(rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k)))
        if len(ops) > MAX_TRANSACTION_OPS:  # a Put is a put and a read: more than etcd's default allows
            return await self._transaction_in_steps(compares, writes)
        # One etcd Txn; on failure it reads every compared key to say which failed.
        answer = await self._txn(conditions, ops, [self._read_op(self._data_key(c.key)) for c in compares])
        if not answer.succeeded:
            failed = []
            for c, response in zip(compares, answer.responses):
                kvs = response.response_range.kvs
                if (kvs[0].version - 1 if kvs else -1) != c.version:
                    failed.append(c.key)
            raise TransactionFailed(failed or [c.key for c in compares])
        versions, i = [], 0
        for w in writes:
            if isinstance(w, Put):
                versions.append(answer.responses[i + 1].response_range.kvs[0].version - 1)
                i += 2
            else:
                versions.append(None)
                i += 1
        return versions

    async def _transaction_without_versions(self, compares, writes) -> Any:
        """The Txn without read-backs; on failure it reads every compared
        key to say which failed. Returns etcd's answer."""
        conditions = [self._version_is(self._data_key(c.key), c.version + 1) for c in compares]
        ops = [rpc.RequestOp(request_put=rpc.PutRequest(key=self._data_key(w.key), value=bytes(w.value)))
               if isinstance(w, Put) else
               rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=self._data_key(w.key)))
               for w in writes]
        answer = await self._txn(conditions, ops, [self._read_op(self._data_key(c.key)) for c in compares])
        if not answer.succeeded:
            failed = []
            for c, response in zip(compares, answer.responses):
                kvs = response.response_range.kvs
                if (kvs[0].version - 1 if kvs else -1) != c.version:
                    failed.append(c.key)
            raise TransactionFailed(failed or [c.key for c in compares])
        return answer

    async def _transaction_in_steps(self, compares, writes) -> list[int | None]:
        """The same Txn without the read-backs (they would pass etcd's op
        cap): versions come from one read after it, compared by revision."""
        answer = await self._transaction_without_versions(compares, writes)
        revision = answer.header.revision
        versions = []
        for w in writes:
            if isinstance(w, Put):
                found = await self._call(self._kv.Range, rpc.RangeRequest(
                    key=self._data_key(w.key), revision=revision), idempotent=True)
                versions.append(found.kvs[0].version - 1 if found.kvs else None)
            else:
                versions.append(None)
        return versions

    async def children(self, key: str) -> list[str]:
        check_key(key)
        prefix = key.rstrip("/") + "/"
        low = self._data_key(prefix)
        request = rpc.RangeRequest(key=low, range_end=_range_end(low), keys_only=True)
        answer = await self._call(self._kv.Range, request, idempotent=True)
        names = set()
        for kv in answer.kvs:
            rest = bytes(kv.key)[len(low):].decode()
            if rest:  # the key "/" itself is not its own child
                names.add(rest.split("/", 1)[0])
        return sorted(names)

    async def keys_below(self, key: str) -> list[str]:
        """Range requests of keys only (the contract's ``get`` per key), a
        page of at most ``KEYS_PER_RANGE`` each, fewer while an answer is over
        gRPC's message size (4 MiB: ~45,000 keys of the object ledgers'
        index, 15,000 compacted ledgers' record, marker and chunk record,
        which 10,000 topics keeping a few ledgers each pass; one request
        for all fails there)."""
        check_key(key)
        low = self._data_key(key.rstrip("/") + "/")
        end = _range_end(low)
        at = low
        found: list[str] = []
        step = KEYS_PER_RANGE
        while True:
            answer, step = await self._page(at, end, step, keys_only=True)
            keys = [bytes(kv.key) for kv in answer.kvs]
            found.extend(k[len(low):].decode() for k in keys)
            if not answer.more or not keys:
                return sorted(rest for rest in found if rest)
            at = keys[-1] + b"\x00"  # the next key after the page's last

    async def _page(self, at: bytes, end: bytes, step: int, *, keys_only: bool = False) -> tuple[Any, int]:
        """One range request of at most ``step`` keys from ``at`` (before
        ``end``), ``step`` halved while the answer is over gRPC's message
        size: the answer and the step that fitted. ``_TooLarge`` if a single
        record does not fit; MetadataError as any call."""
        while True:
            request = rpc.RangeRequest(key=at, range_end=end, limit=step, keys_only=keys_only)
            try:
                return await self._call(self._kv.Range, request, idempotent=True), step
            except _TooLarge:
                if step == 1:
                    raise
                step //= 2

    async def children_records(self, key: str, start: str = "", limit: int = 64) -> list[Record]:
        """One range request per page (the contract's ``get`` per child
        costs a round trip and a gRPC call each); keys deeper than a child
        are skipped (read again if they filled the page)."""
        check_key(key)
        if limit < 1:
            raise ValueError(f"limit must be at least 1, not {limit!r}")
        low = self._data_key(key.rstrip("/") + "/")
        end = _range_end(low)
        at = low + start.encode()
        found: list[Record] = []
        step = limit  # records per request (fewer while an answer is over gRPC's message size)
        while len(found) < limit:
            answer, step = await self._page(at, end, min(step, limit - len(found)))
            for kv in answer.kvs:
                name = bytes(kv.key)[len(low):].decode()
                if name and "/" not in name:
                    found.append(Record(f"{key.rstrip('/')}/{name}", bytes(kv.value), kv.version - 1, kv.lease != 0))
            if not answer.more or not answer.kvs:
                break
            at = bytes(answer.kvs[-1].key) + b"\x00"
        return found

    async def increment(self, key: str, delta: int = 1) -> int:
        check_key(key)
        check_delta(delta)
        k = self._counter_root + key.encode()
        lock = self._counter_locks.setdefault(key, asyncio.Lock())
        async with lock:
            answer = await self._call(self._kv.Range, rpc.RangeRequest(key=k), idempotent=True)
            found = answer.kvs
            while True:
                if found:
                    current = int(found[0].value)
                    condition = rpc.Compare(
                        result=rpc.Compare.EQUAL, target=rpc.Compare.MOD, key=k, mod_revision=found[0].mod_revision
                    )
                else:
                    current, condition = 0, self._version_is(k, 0)
                value = current + delta
                put = rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=str(value).encode()))
                answer = await self._txn([condition], [put], [self._read_op(k)])
                if answer.succeeded:
                    return value
                found = answer.responses[0].response_range.kvs  # another process won: retry on its value

    def watch(self, prefix, callback) -> Watch:
        self._check_open()
        return self._watches.add(prefix, callback, after=self._answered_revision)

    async def _watch_loop(self, created: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        ranges = self._watch_ranges
        backoff = 0.05
        while not self._closed:

            async def requests():
                # Watch ids are ours (range i is id i + 1): 0 would ask etcd to pick one.
                for i, (key, end) in enumerate(ranges):
                    create = rpc.WatchCreateRequest(
                        key=key, range_end=end, start_revision=self._watch_from[i], watch_id=i + 1,
                        progress_notify=True,
                    )
                    yield rpc.WatchRequest(create_request=create)
                # Keep our side open (a half-close ends the stream) until the
                # store closes, asking for progress now and then: the answer
                # tells a live member from one out of reach (below).
                while True:
                    try:
                        await asyncio.wait_for(self._closing.wait(), _WATCH_PROBE_S)
                        return
                    except TimeoutError:
                        yield rpc.WatchRequest(progress_request=rpc.WatchProgressRequest())

            # Leader required: a member that loses its leader (cut from its
            # peers) ends the stream, so the watch does not go silent there
            # while the others go on; the next stream goes to another member.
            call = self._watch_stub.Watch(requests(), wait_for_ready=True, metadata=_REQUIRE_LEADER)
            self._watch_call = call
            opened = 0
            try:
                while True:
                    try:
                        answer = await asyncio.wait_for(call.read(), _WATCH_SILENCE_S)
                    except asyncio.CancelledError:
                        if self._closed:  # close() cancelled the call: the read ends so, not by a task cancel
                            return
                        raise
                    except TimeoutError:
                        # Not even an answer to a progress request: the member
                        # is out of reach (cut off), though gRPC's ping has not
                        # said so yet (10 s + 5 s). Another member is asked.
                        log.warning("etcd watch stream silent for %g s (its member out of reach?); watching "
                                    "again from revision %s on the next member", _WATCH_SILENCE_S,
                                    ", ".join(str(r) for r in self._watch_from))
                        break
                    if answer is grpc.aio.EOF or self._closed:
                        # Closed: checked here as well as by cancellation, which
                        # Python 3.11's wait_for loses when the read completes
                        # in the same pass as the cancel (the stream would be
                        # read on, until etcd ended it).
                        break
                    if answer.watch_id == _PROGRESS_ANSWER:
                        # The member is there. Its revision is not used: etcd
                        # (3.5.1) answers at once, before slow watchers catch up.
                        continue
                    i = answer.watch_id - 1
                    if not 0 <= i < len(ranges):
                        log.warning("etcd answered for a watch the store did not open (id %d)", answer.watch_id)
                        continue
                    if answer.created:
                        opened += 1
                        if opened == len(ranges):
                            created.set()
                            backoff = 0.05
                    if answer.canceled:
                        if answer.compact_revision:
                            # History before it is gone: changes in between are lost to the watchers.
                            log.error("etcd compacted past revision %d; resuming the watch at %d",
                                      self._watch_from[i], answer.compact_revision)
                            self._watch_from[i] = answer.compact_revision
                        else:
                            log.warning("etcd cancelled the store's watch: %s", answer.cancel_reason)
                        break
                    if not answer.events:
                        if not answer.created:
                            # A progress notice: this range has had every change up to the header's revision.
                            self._watch_from[i] = max(self._watch_from[i], answer.header.revision + 1)
                        continue
                    for event in answer.events:
                        kv = event.kv
                        name = bytes(kv.key)[len(self._key_root):].decode()
                        if event.type == rpc.Event.DELETE:
                            kind = EventType.DELETED
                        elif kv.version == 1:
                            kind = EventType.CREATED
                        else:
                            kind = EventType.MODIFIED
                        self._watch_from[i] = kv.mod_revision + 1
                        version = None if kind is EventType.DELETED else kv.version - 1
                        self._watches.dispatch(loop, [Notification(kind, name, version)], revision=kv.mod_revision)
            except grpc.aio.AioRpcError as exc:
                if _no_leader(exc) and opened:
                    log.warning("etcd ended the store's watch: its member lost its raft leader (cut from its "
                                "peers?); watching again from revision %s on a member with a leader",
                                ", ".join(str(r) for r in self._watch_from))
                elif _no_leader(exc):
                    log.debug("an etcd member without a leader refused the store's watch; trying the next")
                else:
                    log.debug("etcd watch stream broke: %r", exc)
            finally:
                call.cancel()
            if self._closed:
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def create_session(self, ttl_s: float = 10.0) -> MetadataSession:
        if not ttl_s > 0:
            raise ValueError(f"session ttl must be > 0, not {ttl_s!r}")
        sent = time.monotonic()
        # Sent again when its connection breaks under it (to the next member):
        # a grant that did land is a lease nothing is attached to, which etcd
        # drops after its TTL. etcd's own client counts LeaseGrant repeatable.
        answer = await self._call(
            self._lease_stub.LeaseGrant, rpc.LeaseGrantRequest(TTL=max(1, math.ceil(ttl_s))), idempotent=True
        )
        if answer.error:
            raise MetadataError(f"etcd refused a lease: {answer.error}")
        session = EtcdSession(self, answer.ID, answer.TTL, sent)
        self._sessions[answer.ID] = session
        session._start()
        return session

    async def _end_session(self, session: EtcdSession, *, best_effort: bool) -> None:
        try:
            # No longer than the TTL: by then etcd drops the keys by itself.
            request = rpc.LeaseRevokeRequest(ID=session.lease_id)
            await self._call(self._lease_stub.LeaseRevoke, request, idempotent=True, timeout=session.ttl_s)
        except _LeaseGone:
            pass  # already expired: its keys are gone
        except MetadataError as exc:
            # Unreachable or closed: etcd drops the keys when the TTL runs out.
            (log.debug if best_effort else log.warning)("revoking lease of %s failed: %s", session.id, exc)
        finally:
            self._sessions.pop(session.lease_id, None)

    async def close(self) -> None:
        """Revoke this store's sessions, stop the watch, close the connection. Idempotent."""
        if self._closed:
            return
        try:
            await asyncio.gather(*(s.close() for s in list(self._sessions.values())), return_exceptions=True)
        finally:
            self._closed = True
            self._closing.set()
            self._watches.clear()
            if self._watch_task is not None:
                # Cancelling the stream ends the read the loop waits on
                # whatever becomes of the task's own cancel (see _watch_loop).
                if self._watch_call is not None:
                    self._watch_call.cancel()
                self._watch_task.cancel()
                done, _ = await asyncio.wait({self._watch_task}, timeout=_WATCH_CLOSE_S)
                if not done:  # never so far: closing the channel below ends its stream anyway
                    log.warning("etcd watch did not end within %g s of close; closing its channel", _WATCH_CLOSE_S)
            if self._channel is not None:
                await self._channel.close()
                self._channel = None
            channels, self._member_channels = list(self._member_channels.values()), {}
            for channel in channels:
                await channel.close()


class _LeaseGone(Exception):
    """etcd answered 'requested lease not found'."""


#: Keys per range request of :meth:`EtcdMetadataStore.keys_below` (~100 bytes each).
KEYS_PER_RANGE = 10_000


class _TooLarge(MetadataError):
    """An answer over the gRPC channel's message size (RESOURCE_EXHAUSTED):
    a range of many records asks for fewer at a time."""
