"""Deduplication and idempotent producers: sequence tables checked in the
topic's ordered append path.

Two kinds of writer identity share one mechanism (:class:`SequenceState`):

- **Pulsar deduplication** (the official client): keyed by producer name; a
  SEND carries ``sequence_id`` and, for a batch, ``highest_sequence_id``. Used
  when the topic's ``deduplication`` policy is on, and for a producer that
  asks for it with the metadata (``properties``) ``magnetar.deduplicate=true``
  whatever the policy (the Spark sink does; any Pulsar client can). A batch whose highest
  sequence is new is stored whole even if it starts below the highwater (Pulsar
  bug #6273 dropped such batches); chunks of one message share a sequence id
  and are told apart by ``chunk_id`` (a later chunk is not a duplicate).
- **Magnetar idempotent producers**: keyed by a leased producer id (pid) carried
  in the entry's MessageMetadata with a generation and the sequence number of
  its first message. An entry is appended only if its first sequence is
  exactly highwater + 1 and its generation equals the stored one or is one
  greater (a new incarnation); an older generation is fenced; a gap is
  OutOfOrderSequence. Always on for producers that declared themselves
  idempotent.

A retry of something already appended is answered with the original result
(message id and offset) while it is in the recent window, even if the
original is still being synced; beyond the window it is answered as a
duplicate with message id -1:-1, as Pulsar does.

Durability: checks use the *pending* highwater (what has been handed to
storage), snapshots use the *durable* one. If storage fails the topic is
unloaded and rebuilt from the last snapshot plus a replay of the log, so a
retry of an entry that never reached the disk is not mistaken for a duplicate
(Pulsar bug #5218).

Recovery: snapshots (both tables and the log position they cover) live in the
metadata store under ``/dedup/<managed ledger name>``; loading a topic reads
the snapshot and replays the entries after it, so a new owner knows every
producer and pid the old one knew. Leases are written to the snapshot before
the client hears of them.
"""
from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from magnetar.formats import check_format
from magnetar.metadata import MetadataError, MetadataStore, KeyNotFound
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import Position

from magnetar.broker.entries.entry_format import entry_info, producer_block
from magnetar.broker.errors import BrokerError, NotAllowed, OutOfOrderSequence, ProducerFenced

from .replicators import replicated_sequence

#: A snapshot record's format (its ``format`` field; a record without one is format 1).
SNAPSHOT_FORMAT = 1

if TYPE_CHECKING:
    from .producer import PendingSend, Producer

log = logging.getLogger(__name__)

SNAPSHOT_ROOT = "/dedup"
PID_BLOCK_COUNTER = "/counters/pid-block"
PID_BLOCK_SIZE = 100
#: Results kept per writer to answer retries with the original message id.
RECENT_WINDOW = 1000


class Duplicate(Exception):
    """Internal: the send repeats an appended entry; ``result`` answers it."""

    def __init__(self, result: "PendingSend | None") -> None:
        self.result = result


@dataclass(slots=True)
class SequenceState:
    """What the broker knows of one writer (a producer name or a pid).

    Made at a writer's first entry on a topic, deduplicating or not: one
    object with slots (no ``__dict__``), and the retry window only once a
    deduplicating writer needs it (10,000 producers made 30,000 objects
    that each collection of their generation walked)."""

    highwater: int = -1
    durable_highwater: int = -1
    generation: int = 0
    last_chunk: int = -1
    last_used_ms: int = 0
    lease_expiry_ms: int = 0
    #: When the lease granted by this process runs out, by the monotonic
    #: clock (None: not leased here since the topic was loaded). Not stored:
    #: it keeps a wall-clock step from expiring a pid whose holder renews.
    lease_until_mono: float | None = None
    #: The last ``RECENT_WINDOW`` entries' outcomes by last sequence id
    #: (deduplicating writers only; None until the first).
    recent: "OrderedDict[int, PendingSend] | None" = None

    def remember(self, last_sequence: int, result: "PendingSend") -> None:
        recent = self.recent
        if recent is None:
            recent = self.recent = OrderedDict()
        recent[last_sequence] = result
        while len(recent) > RECENT_WINDOW:
            recent.popitem(last=False)

    def original(self, last_sequence: int) -> "PendingSend | None":
        recent = self.recent
        return None if recent is None else recent.get(last_sequence)

    def doc(self) -> list:
        return [self.durable_highwater, self.generation, self.last_used_ms, self.lease_expiry_ms]

    @classmethod
    def from_doc(cls, doc: list) -> "SequenceState":
        hw, gen, used, expiry = (list(doc) + [0, 0, 0, 0])[:4]
        return cls(highwater=hw, durable_highwater=hw, generation=gen, last_used_ms=used, lease_expiry_ms=expiry)


@dataclass(frozen=True, slots=True)
class PidLease:
    pid: int
    generation: int
    next_sequence: int
    expire_ms: int


class PidAllocator:
    """Unique producer ids, taken from a durable counter in blocks.

    A block is reserved before any of its pids is handed out, so a pid is never
    issued twice, even when a broker dies with most of its block unused.
    """

    def __init__(self, store: MetadataStore, block_size: int = PID_BLOCK_SIZE) -> None:
        self.store = store
        self.block_size = block_size
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def allocate(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                block = await self.store.increment(PID_BLOCK_COUNTER)
                self._next = (block - 1) * self.block_size + 1
                self._end = block * self.block_size + 1
            pid = self._next
            self._next += 1
            return pid


async def delete_snapshot(store: MetadataStore, ledger_name: str) -> None:
    """Forget a deleted topic's producer sequences and pids."""
    try:
        await store.delete(f"{SNAPSHOT_ROOT}/{ledger_name}")
    except KeyNotFound:
        pass


def _now_ms() -> int:
    return int(time.time() * 1000)


class Deduplicator:
    """The sequence tables of one topic. See the module docstring."""

    def __init__(self, store: MetadataStore, ledger_name: str, *, enabled: bool,
                 snapshot_interval: int = 1000, pid_expiry_ms: int = 7 * 24 * 3600 * 1000,
                 name_expiry_ms: int = 6 * 3600 * 1000) -> None:
        self.store = store
        self.key = f"{SNAPSHOT_ROOT}/{ledger_name}"
        self.enabled = enabled
        self.snapshot_interval = snapshot_interval
        self.pid_expiry_ms = pid_expiry_ms
        self.name_expiry_ms = name_expiry_ms
        self.names: dict[str, SequenceState] = {}
        self.pids: dict[int, SequenceState] = {}
        # The last durable entry, as two ints: set once per entry, read per snapshot.
        self._durable_ledger = -1
        self._durable_entry = -1
        self._since_snapshot = 0
        self._snapshot_task: asyncio.Task | None = None
        self._snapshot_again = False
        self._version: int | None = None
        # Durable snapshots asked for (by leases) and covered by a finished
        # write: one write covers every request made before it started.
        self._requested = 0
        self._covered = 0
        self._covering: list[tuple[int, asyncio.Future]] = []
        #: Names of the producers a closing topic has just let go: attached
        #: until the final snapshot is written.
        self._closing_attached: frozenset[str] = frozenset()
        #: The state last written, or read back with nothing to replay: a
        #: snapshot equal to it is not written (it is what the store holds).
        self._stored: bytes | None = None

    # -- the check, in the ordered append path ---------------------------------
    def check(self, producer: "Producer", send: pb.CommandSend, block: PayloadBlock) -> tuple | None:
        """Decide on a send. Returns a token for :meth:`record`, or None.

        Raises :class:`Duplicate` (answer with the original), ProducerFenced,
        OutOfOrderSequence or NotAllowed (refuse; nothing changes).
        """
        if producer.idempotent:
            n = max(1, send.num_messages)
            md = block.metadata
            if md.magnetar_pid:
                return self._check_pid(md.magnetar_pid, md.magnetar_generation, md.magnetar_sequence, n)
        last = send.sequence_id
        if send.highest_sequence_id > last:
            last = send.highest_sequence_id
        chunk = -1
        if send.is_chunk:
            chunk = block.metadata.chunk_id
        deduplicating = self.enabled or producer.deduplicate
        state = self.names.get(producer.name) if deduplicating else None
        if state is not None:
            if chunk >= 0:
                if last < state.highwater or (last == state.highwater and chunk <= state.last_chunk):
                    raise Duplicate(state.original(last) if chunk == state.last_chunk else None)
            elif last <= state.highwater:
                raise Duplicate(state.original(last))
        return ("name", producer.name, last, chunk, deduplicating)

    def _check_pid(self, pid: int, generation: int, first: int, n: int) -> tuple:
        state = self.pids.get(pid)
        if state is None:
            raise NotAllowed(f"producer id {pid} is not leased on this topic (expired or never leased); lease again")
        if generation < state.generation:
            raise ProducerFenced(f"producer id {pid} generation {generation} is fenced by generation {state.generation}")
        if generation > state.generation + 1:
            raise ProducerFenced(f"producer id {pid} generation {generation} skips ahead of {state.generation}")
        last = first + n - 1
        if last <= state.highwater:
            raise Duplicate(state.original(last))
        if first != state.highwater + 1:
            raise OutOfOrderSequence(
                f"producer id {pid}: sequence {first} is not the next one ({state.highwater + 1})"
            )
        return ("pid", pid, last, generation, True)

    @property
    def durable_position(self) -> Position | None:
        """The last entry known durable (snapshots record it), None before any."""
        return Position(self._durable_ledger, self._durable_entry) if self._durable_ledger >= 0 else None

    @durable_position.setter
    def durable_position(self, position: Position | None) -> None:
        self._durable_ledger, self._durable_entry = (position.ledger_id, position.entry_id) if position else (-1, -1)

    def record(self, token: tuple | None, result: "PendingSend", now_ms: int) -> None:
        """The entry was handed to storage at ``now_ms`` (the caller's clock
        reading: this runs once per entry): move the pending highwater."""
        if token is None:
            return
        kind, key, last, extra, deduplicating = token
        table = self.pids if kind == "pid" else self.names
        state = table.get(key)
        if state is None:
            state = table[key] = SequenceState()
        if last > state.highwater:
            state.highwater = last
        if kind == "pid":
            if extra > state.generation:
                state.generation = extra
        else:
            state.last_chunk = extra
        state.last_used_ms = now_ms
        if deduplicating:
            # Only these answer retries with the original result; otherwise the
            # window would cost an insert and an eviction per entry for nothing.
            state.remember(last, result)

    def on_durable_run(self, tokens, ledger_id: int, last_entry_id: int) -> None:
        """The entries of ``tokens`` (in append order, from :meth:`check`) are
        on disk, the last at ``ledger_id:last_entry_id``: the durable
        highwaters may follow, and a snapshot is due every
        ``snapshot_interval`` entries (at the end of the run that crosses it)."""
        self._durable_ledger = ledger_id
        self._durable_entry = last_entry_id
        pids, names = self.pids, self.names
        for token in tokens:
            if token is not None:
                kind, key, last, _, _ = token
                state = (pids if kind == "pid" else names).get(key)
                if state is not None and last > state.durable_highwater:
                    state.durable_highwater = last
        self._since_snapshot += len(tokens)
        if self._since_snapshot >= self.snapshot_interval:
            self.request_snapshot()

    def on_durable(self, token: tuple | None, ledger_id: int, entry_id: int) -> None:
        """:meth:`on_durable_run` of one entry (the usual run at many written
        topics: one entry per topic per commit), without a sequence to walk."""
        self._durable_ledger = ledger_id
        self._durable_entry = entry_id
        if token is not None:
            kind, key, last, _, _ = token
            state = (self.pids if kind == "pid" else self.names).get(key)
            if state is not None and last > state.durable_highwater:
                state.durable_highwater = last
        self._since_snapshot += 1
        if self._since_snapshot >= self.snapshot_interval:
            self.request_snapshot()

    def last_sequence_id(self, producer_name: str, deduplicate: bool = False) -> int:
        state = self.names.get(producer_name)
        return state.highwater if ((self.enabled or deduplicate) and state is not None) else -1

    # -- leases ------------------------------------------------------------------
    async def lease(self, allocator: PidAllocator, pid: int, generation: int | None, expire_ms: int) -> PidLease:
        """Grant or renew a pid lease; persisted before it returns.

        ``pid < 0`` asks for a new pid (random starting generation, sequence 0).
        A known pid with its current ``generation`` renews; a known pid without a
        generation is a takeover: the generation moves up by one, fencing the
        previous holder. An unknown or expired pid raises NotAllowed.
        """
        now = _now_ms()
        if pid < 0:
            pid = await allocator.allocate()
            state = SequenceState(generation=random.randrange(1, 1 << 31))
            self.pids[pid] = state
        else:
            state = self.pids.get(pid)
            if state is None:
                raise NotAllowed(f"producer id {pid} is unknown or expired on this topic; ask for a new one")
            if generation is None:
                state.generation += 1
            elif generation != state.generation:
                raise ProducerFenced(f"producer id {pid} is at generation {state.generation}, not {generation}")
        state.last_used_ms = now
        state.lease_expiry_ms = now + expire_ms
        state.lease_until_mono = time.monotonic() + expire_ms / 1000
        await self.snapshot()
        return PidLease(pid, state.generation, state.highwater + 1, state.lease_expiry_ms)

    def expire(self, now_ms: int | None = None, attached: set[str] | frozenset = frozenset(),
               mono_now: float | None = None) -> int:
        """Drop pids unused for their expiry period whose lease ran out, and
        producer names (Pulsar dedup) not attached and unused for theirs, as
        Pulsar does after producer inactivity; return how many went.

        A retry from a writer forgotten this way is stored again: the
        guarantee holds within the expiry periods (7 days / 6 hours by default).

        Ages are read on the wall clock (``now_ms``: they must survive a
        restart), but a lease this process granted is also timed on the
        monotonic clock (``mono_now``), and a pid whose lease is still running
        by that clock stays: a wall clock stepped forward past the expiry
        period (an NTP step, a VM resumed) must not take the pid of a producer
        that is renewing its lease (``docs/reliability.md``, clock jumps).
        """
        now = _now_ms() if now_ms is None else now_ms
        mono = time.monotonic() if mono_now is None else mono_now
        gone = [pid for pid, s in self.pids.items()
                if s.last_used_ms + self.pid_expiry_ms < now and s.lease_expiry_ms < now
                and (s.lease_until_mono is None or s.lease_until_mono < mono)]
        for pid in gone:
            del self.pids[pid]
        names = [name for name, s in self.names.items()
                 if s.last_used_ms + self.name_expiry_ms < now and name not in attached]
        for name in names:
            del self.names[name]
        return len(gone) + len(names)

    # -- snapshots and recovery ----------------------------------------------------
    def _snapshot_doc(self) -> dict:
        pos = self.durable_position
        return {
            "format": SNAPSHOT_FORMAT,
            "position": [pos.ledger_id, pos.entry_id] if pos is not None else None,
            "names": {name: s.doc() for name, s in self.names.items()},
            "pids": {str(pid): s.doc() for pid, s in sorted(self.pids.items())},
        }

    def attached_names(self) -> set[str]:
        """Names of producers attached now (never expired); set by the topic."""
        return set()

    def request_snapshot(self) -> None:
        if self._snapshot_task is not None and not self._snapshot_task.done():
            self._snapshot_again = True
            return
        self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot_loop())

    async def _snapshot_loop(self) -> None:
        try:
            while True:
                self._snapshot_again = False
                covering = self._requested
                await self._write_snapshot()
                self._covered = covering
                self._settle_covered(None)
                if not self._snapshot_again:
                    return
        except Exception as exc:
            _log_failure("dedup snapshot of %s failed", self.key, exc)
            self._settle_covered(exc)

    def _settle_covered(self, error: BaseException | None) -> None:
        """Wake the :meth:`snapshot` callers a finished write covered (all of
        them, with the error, if the write failed)."""
        waiting, self._covering = self._covering, []
        for target, fut in waiting:
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            elif target <= self._covered:
                fut.set_result(None)
            else:
                self._covering.append((target, fut))

    async def snapshot(self) -> None:
        """Return once a snapshot written after this call began is stored.

        Concurrent callers (a burst of leases) share writes: one write covers
        every request made before it started, so N leases cost about two
        writes of the table, not N. Raises what the metadata store raised.
        """
        self._requested += 1
        fut = asyncio.get_running_loop().create_future()
        self._covering.append((self._requested, fut))
        self.request_snapshot()
        await fut

    async def _write_snapshot(self) -> None:
        self.expire(attached=self.attached_names() | self._closing_attached)
        self._since_snapshot = 0
        body = json.dumps(self._snapshot_doc()).encode()
        if body == self._stored:
            return  # durable already: a topic idle since its load costs no write
        await self.store.put(self.key, body)
        self._stored = body

    async def recover(self, ledger) -> None:
        """Load the snapshot, then replay the log after the position it covers."""
        record = await self.store.get(self.key)
        start: Position | None = None
        if record is not None:
            doc = json.loads(record.value)
            check_format("deduplication snapshot", self.key, doc.get("format", 1), SNAPSHOT_FORMAT)
            self.names = {name: SequenceState.from_doc(v) for name, v in doc.get("names", {}).items()}
            self.pids = {int(pid): SequenceState.from_doc(v) for pid, v in doc.get("pids", {}).items()}
            if doc.get("position"):
                start = ledger.next_position(Position(*doc["position"]))
        if start is None:
            start = ledger.first_position()
        replayed = 0
        while start is not None:
            entries = await ledger.read_entries(start, 500)
            if not entries:
                break
            for entry in entries:
                self._replay(entry.data)
                self.durable_position = entry.position
            replayed += len(entries)
            start = ledger.next_position(entries[-1].position)
        if replayed:
            log.info("%s: replayed %d entries to rebuild producer sequences", self.key, replayed)
        else:
            # Nothing after the stored snapshot (or nothing at all): that is
            # the state, and a topic left unchanged need not write it again.
            # After a replay it is written (retention may trim the entries).
            self._stored = json.dumps(self._snapshot_doc()).encode()

    def _replay(self, data: bytes) -> None:
        n = entry_info(data).num_messages
        try:
            md = PayloadBlock(producer_block(data)).metadata
        except Exception:
            return
        # Replicated first: an entry an idempotent producer wrote in another
        # region keeps that producer's pid in its metadata, but here it was
        # the replicator's producer that sent it, deduplicated by the source
        # position (as :meth:`check` does, the replicator not being
        # idempotent). Taken for the pid's, it left the replicator's
        # highwater behind after a restart, and the resends were stored
        # again (found by the chaos harness's regions topology).
        if md.HasField("replicated_from") and (sent := replicated_sequence(md.replicated_from, md.properties)):
            state = self.names.setdefault(sent[0], SequenceState())
            last = sent[1]
        elif md.magnetar_pid:
            state = self.pids.setdefault(md.magnetar_pid, SequenceState())
            last = md.magnetar_sequence + n - 1
            state.generation = max(state.generation, md.magnetar_generation)
        else:
            state = self.names.setdefault(md.producer_name, SequenceState())
            last = max(md.sequence_id, md.highest_sequence_id)
            state.last_chunk = md.chunk_id if md.HasField("chunk_id") else -1
        state.highwater = state.durable_highwater = max(state.highwater, last)
        # Replayed writers count as seen now: their age is unknown, keep them a full period.
        state.last_used_ms = max(state.last_used_ms, _now_ms())

    async def close(self, attached: set[str] | frozenset = frozenset()) -> None:
        """Write the final snapshot. ``attached``: the producers attached when
        the topic began closing (it lets them go first); they count as
        attached, else a wall clock stepped past the name expiry (6 h) would
        drop every writer of the topic from the snapshot the next owner or
        the restarted broker loads, and their resends would be stored again."""
        self._closing_attached = frozenset(attached)
        try:
            await self.snapshot()
        except Exception as exc:
            _log_failure("final dedup snapshot of %s failed", self.key, exc)


def _log_failure(message: str, key: str, exc: BaseException) -> None:
    """A snapshot that failed on the disk (EIO, ENOSPC) is expected under a
    failing disk and harmless (the next load replays the log from the last
    snapshot stored): one line. Anything else is a bug: its traceback."""
    if isinstance(exc, (MetadataError, OSError)):
        log.error(message + ": %s", key, exc)
    else:
        log.error(message, key, exc_info=exc)
