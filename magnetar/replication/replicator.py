"""One topic copied to one remote cluster.

A replicator reads its topic's managed ledger through the durable cursor
``pulsar.repl.<remote>``, and for each entry:

- skips it if it came from another cluster (``replicated_from`` is set: it is
  never forwarded again), if it is a marker that stays local (a snapshot), or
  if its ``replicate_to`` list excludes the remote (snapshot responses name
  the one cluster that asked);
- otherwise sends it to the remote topic as it is stored (the payload, batch
  and compression untouched), its metadata stamped with ``replicated_from``
  and the source position (:data:`SOURCE_POSITION_PROPERTY`), with the
  sequence id :func:`source_sequence`;
- once every entry of a read has its receipt, moves the cursor's mark-delete
  position past them.

Its replication delay (:meth:`Replicator.delay_seconds`, Pulsar's
``replicationDelayInSeconds``) is the age of the oldest entry the remote does
not have yet: the publish time of the first entry of the read in flight, or,
while nothing is read (the remote unreachable), the arrival of the first
entry appended since the last mark-delete. 0 when nothing waits. Entries that
were stored before the topic loaded here count from their first read.

Failure modes: while the remote is unreachable the producer reconnects by
itself and the sends wait (no send timeout): the cursor stays, holding the
entries. A fatal producer error (remote topic deleted, fenced...) ends the
round: the producer is closed, the cursor rewound to its mark-delete
position, and a new round starts after a backoff. Entries sent twice by
such a rewind carry the same sequence ids, so the remote drops them.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from magnetar.broker.entries import markers
from magnetar.broker.entries.entry_format import entry_info
from magnetar.broker.topics.replicators import SOURCE_POSITION_PROPERTY, replicator_cursor, source_sequence
from magnetar.broker.topics.stats import RateMeter
from magnetar.client.backoff import Backoff
from magnetar.client.errors import ConnectError, Timeout
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock
from magnetar.storage import ManagedCursor

if TYPE_CHECKING:
    from magnetar.client.producer import AsyncProducer

    from .remote import RemoteClusters

log = logging.getLogger(__name__)

#: Entries read (and sent before waiting for their receipts) per round trip.
READ_BATCH = 200


def forwardable(metadata: pb.MessageMetadata, remote: str) -> bool:
    """Whether an entry with this metadata goes to ``remote``: not if it came
    from another cluster, nor if it is a marker that stays here (snapshots),
    nor if its ``replicate_to`` leaves the remote out."""
    if metadata.HasField("replicated_from"):
        return False
    if metadata.HasField("marker_type") and metadata.marker_type not in markers.REPLICATED:
        return False
    return not metadata.replicate_to or remote in metadata.replicate_to


def stamped(metadata: pb.MessageMetadata, local: str, ledger_id: int, entry_id: int) -> bytes:
    """The metadata as the remote stores it: marked as coming from ``local``."""
    metadata.replicated_from = local
    metadata.properties.append(pb.KeyValue(key=SOURCE_POSITION_PROPERTY, value=f"{ledger_id}:{entry_id}"))
    return metadata.SerializeToString()


class Replicator:
    """Copies ``topic`` (a name) read through ``cursor`` to ``remote``.

    :meth:`start` runs it as a task; :meth:`stop` cancels it (the cursor
    stays with the topic). Implements the topic's ``ReplicatorView``.
    """

    def __init__(self, topic_name: str, cursor: ManagedCursor, local: str, remote: str,
                 clusters: "RemoteClusters") -> None:
        self.topic_name = topic_name
        self.cursor = cursor
        self.local = local
        self.remote = remote
        self._clusters = clusters
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._producer: "AsyncProducer | None" = None
        self.msg_out = 0
        self.bytes_out = 0
        self._rates = RateMeter()
        #: Epoch ms of the oldest entry the remote does not have yet (None: none known to wait).
        self._waiting_since_ms: int | None = None
        self.connected_since: str | None = None
        self.outbound_url: str | None = None

    @property
    def cursor_name(self) -> str:
        return replicator_cursor(self.remote)

    # -- ReplicatorView ----------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replicator {self.topic_name} -> {self.remote}")

    def on_new_entries(self) -> None:
        if self._waiting_since_ms is None:
            self._waiting_since_ms = _now_ms()
        self._wake.set()

    def delay_seconds(self) -> float:
        since = self._waiting_since_ms
        return 0.0 if since is None else max(0, _now_ms() - since) / 1000

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        producer, self._producer = self._producer, None
        if producer is not None:
            asyncio.get_running_loop().create_task(_close_quietly(producer))

    def is_connected(self) -> bool:
        return self._producer is not None and self._producer.is_connected()

    def stats(self) -> dict:
        msg_rate, byte_rate = self._rates.rates((self.msg_out, self.bytes_out))
        return {
            "msgOutCounter": self.msg_out,
            "bytesOutCounter": self.bytes_out,
            "msgRateOut": msg_rate,
            "msgThroughputOut": byte_rate,
            "replicationBacklog": self.cursor.backlog(),
            "replicationDelayInSeconds": self.delay_seconds(),
            "connected": self.is_connected(),
            "outboundConnection": self.outbound_url,
            "outboundConnectedSince": self.connected_since,
        }

    # -- the loop ------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = Backoff(0.1, 10.0)
        while True:
            try:
                producer = await self._clusters.create_producer(self.remote, self.topic_name,
                                                                replicator_cursor(self.local))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("replicator %s -> %s: cannot reach the remote topic (%s); retrying",
                            self.topic_name, self.remote, exc)
                if isinstance(exc, (ConnectError, Timeout)):
                    # The broker behind the shared client is gone: the next
                    # client tries the cluster's other brokers. A refusal about
                    # this topic alone (busy, not allowed) keeps the client,
                    # which the other topics' replicators are using.
                    await self._clusters.forget(self.remote)
                await asyncio.sleep(backoff.next())
                continue
            self._producer = producer
            self.outbound_url = producer.conn.url if producer.conn is not None else None
            self.connected_since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.info("replicator %s -> %s: connected", self.topic_name, self.remote)
            try:
                await self._forward(producer, backoff)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("replicator %s -> %s: %s; starting over from the mark-delete position",
                            self.topic_name, self.remote, exc)
            finally:
                if self._producer is producer:
                    self._producer = None
                    self.connected_since = None
                    asyncio.get_running_loop().create_task(_close_quietly(producer))
                if not self.cursor.closed:
                    self.cursor.rewind()
            await asyncio.sleep(backoff.next())

    async def _forward(self, producer: "AsyncProducer", backoff: Backoff) -> None:
        cursor = self.cursor
        while True:
            self._wake.clear()
            entries = await cursor.read_entries(READ_BATCH)
            if not entries:
                if not cursor.has_more_entries():
                    await self._wake.wait()
                continue
            sends: list[asyncio.Future] = []
            msgs = nbytes = 0
            for entry in entries:
                block = PayloadBlock(memoryview(entry.data))
                metadata = block.metadata
                if entry is entries[0] and metadata.publish_time:
                    # The read starts at the oldest entry not yet marked deleted.
                    self._waiting_since_ms = metadata.publish_time
                if not forwardable(metadata, self.remote):
                    continue
                pos = entry.position
                n = entry_info(entry.data).num_messages
                payload = block.payload
                sends.append(producer.send_entry_nowait(
                    stamped(metadata, self.local, pos.ledger_id, pos.entry_id), payload, n,
                    source_sequence(pos.ledger_id, pos.entry_id)))
                msgs += n
                nbytes += len(payload)
            if sends:
                failed = [r for r in await asyncio.gather(*sends, return_exceptions=True)
                          if isinstance(r, BaseException)]
                if failed:
                    raise failed[0]
            # Counted before the mark-delete: stats never show a drained
            # backlog with messages missing from the counters.
            self.msg_out += msgs
            self.bytes_out += nbytes
            await cursor.mark_delete(entries[-1].position)
            # The next read (at once if more wait) says how old the next oldest is.
            self._waiting_since_ms = None
            backoff.reset()


def _now_ms() -> int:
    return int(time.time() * 1000)


async def _close_quietly(producer: "AsyncProducer") -> None:
    # No flush: what is pending is sent again from the cursor's mark-delete
    # position by the next round, and a flush could wait on an unreachable
    # remote while the producer's reconnects hold its name there.
    try:
        await producer.close(flush=False)
    except Exception:  # the remote may be gone; the producer is abandoned either way
        pass
