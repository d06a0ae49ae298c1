"""Topic compaction: the latest value of every key, kept in a managed ledger of its own.

What the compacted view is. Every message with a key (its partition key)
up to the *horizon* (the topic's last entry when the compaction started),
minus the messages a later message of the same key supersedes, minus the
keys whose latest message is a tombstone (``null_value`` set, or an empty
payload, as Pulsar's compactor and TableView treat them). Messages without a
key are dropped (Pulsar's default since 3.2, ``topicCompactionRetainNullKey``
off); so are chunked and encrypted messages, which the broker cannot read as
a whole.

How it is stored. The view is a separate managed ledger named
``<topic ledger>/__compaction/<generation>``; each entry is the original
position (two u64) followed by an entry in the topic's own format. A non-batch
message is copied as stored. A batch keeps only its retained messages, rebuilt
uncompressed (the official C++ client does not honour ``compacted_out``
flags, so dropped messages cannot stay in the batch); its batch indexes are
therefore renumbered, which matters only to clients that seek into a
compacted batch by batch index. The topic's managed ledger properties name
the current view and its horizon (``magnetar.compaction.ledger``,
``magnetar.compaction.horizon``); they are switched in one metadata write
after the new view is durable, then the previous view is deleted. A crash
before the switch leaves the previous view in force (the half-written one is
deleted by the next run); after it, at most an unused old view is left.

Incremental. A run reads the previous view plus the topic's entries after
its horizon, so the topic's history before the horizon need not be kept. A
durable cursor ``__compaction`` (as in Pulsar) holds the topic's entries back
from trimming until they are compacted; it is moved to the horizon after each
run.

Reading. ``read_compacted`` consumers (Exclusive/Failover subscriptions and
readers) get, while their read position is at or before the horizon, the
view's entries from that position on (with their original message ids), then
the topic's entries after the horizon. Acknowledgements apply to the original
positions; entries compacted away are never delivered, so such a
subscription's mark-delete position stays behind them until a cumulative
ack (individual acks leave a backlog in the stats, harmless).

Triggers. The admin API (``PUT .../compaction``) and a size threshold
(``compaction_threshold_bytes``: bytes written to the topic since its last
compaction, checked every ``compaction_check_interval_s``). One run per topic
at a time; the status (NOT_RUN, RUNNING, SUCCESS, ERROR with the reason) is
kept in memory for ``GET .../compaction``.

Limits: phase one keeps every key of the topic in memory (key -> message
number); keys are strings (partition keys).
"""
from __future__ import annotations

import asyncio
import logging
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncIterator, Protocol

from magnetar.protocol import ProtocolError, pb
from magnetar.protocol.batch import SingleMessage, decode_batch, encode_batch
from magnetar.protocol.compression import decompress
from magnetar.protocol.frames import PayloadBlock, checksummed_block
from magnetar.storage import Entry, ManagedLedger, Position, catalog

from magnetar.broker.config import BrokerConfig
from magnetar.broker.entries.entry_format import build_entry, entry_info
from magnetar.broker.subscriptions.consumer import Consumer
from magnetar.broker.subscriptions.dispatcher import Dispatcher
from magnetar.broker.subscriptions.subscription import COMPACTION_CURSOR
from magnetar.broker.topic_name import TopicName
from magnetar.storage import ManagedLedgerFactory

if TYPE_CHECKING:  # topic.py does not import this module: no circle
    from .topic import Topic

log = logging.getLogger(__name__)

CURSOR = COMPACTION_CURSOR
PROP_LEDGER = "magnetar.compaction.ledger"
PROP_HORIZON = "magnetar.compaction.horizon"
PROP_GENERATION = "magnetar.compaction.generation"
_ORIGIN = struct.Struct(">QQ")
_READ_CHUNK = 100
UINT64_MAX = (1 << 64) - 1


# -- what an entry holds ---------------------------------------------------------
@dataclass
class _Parsed:
    metadata: pb.MessageMetadata
    #: (key or None, is a tombstone) per message.
    keys: list[tuple[str | None, bool]]
    #: The batch's messages (None for a non-batch entry).
    singles: list[SingleMessage] | None


def _parse(data: bytes) -> _Parsed:
    """The messages of a stored entry. Unreadable entries count as one keyless message."""
    try:
        block = PayloadBlock(memoryview(data))
        meta = block.metadata
        payload = block.payload
        unreadable = (meta.marker_type or meta.encryption_keys
                      or (meta.HasField("num_chunks_from_msg") and meta.num_chunks_from_msg > 1))
        if meta.HasField("num_messages_in_batch"):
            if unreadable:
                return _Parsed(meta, [(None, False)] * max(1, meta.num_messages_in_batch), None)
            raw = decompress(meta.compression, bytes(payload), meta.uncompressed_size)
            singles = decode_batch(raw, meta.num_messages_in_batch)
            keys = [(s.metadata.partition_key if s.metadata.HasField("partition_key") else None,
                     s.metadata.null_value or not s.payload) for s in singles]
            return _Parsed(meta, keys, singles)
        if unreadable:
            return _Parsed(meta, [(None, False)], None)
        key = meta.partition_key if meta.HasField("partition_key") else None
        return _Parsed(meta, [(key, meta.null_value or len(payload) == 0)], None)
    except ProtocolError as exc:
        log.warning("compaction: skipping an unreadable entry: %s", exc)
        return _Parsed(pb.MessageMetadata(), [(None, False)], None)


def _rebuild(data: bytes, parsed: _Parsed, keep: list[int]) -> bytes:
    """The entry with only the batch messages at indexes ``keep`` (uncompressed)."""
    assert parsed.singles is not None
    info = entry_info(data)
    meta = pb.MessageMetadata()
    meta.CopyFrom(parsed.metadata)
    singles = [parsed.singles[i] for i in keep]
    payload = encode_batch(singles)
    meta.num_messages_in_batch = len(singles)
    meta.compression = pb.NONE
    meta.uncompressed_size = len(payload)
    first = singles[0].metadata
    if first.HasField("partition_key"):
        meta.partition_key = first.partition_key
    if first.HasField("sequence_id"):
        meta.sequence_id = first.sequence_id
    block = checksummed_block(meta.SerializeToString(), payload)
    return build_entry(block, info.publish_time, info.last_offset - len(singles) + 1, len(singles))


# -- the view ----------------------------------------------------------------------
def _pos(text: str) -> Position:
    ledger, entry = text.split(":")
    return Position(int(ledger), int(entry))


@dataclass
class CompactedView:
    """A topic's compacted view: its ledger and horizon (the last topic entry it covers)."""

    ledger: ManagedLedger
    horizon: Position

    @staticmethod
    def split(data: bytes) -> tuple[Position, bytes]:
        ledger, entry = _ORIGIN.unpack_from(data, 0)
        return Position(ledger, entry), data[_ORIGIN.size:]

    async def entries(self, start: Position | None = None) -> AsyncIterator[tuple[Position, Position, bytes]]:
        """(view position, original position, entry bytes) in order, from view position ``start``."""
        pos = start if start is not None else self.ledger.first_position()
        if pos is None:
            return
        while True:
            got = await self.ledger.read_entries(pos, _READ_CHUNK)
            if not got:
                return
            for e in got:
                origin, data = self.split(e.data)
                yield e.position, origin, data
            pos = self.ledger.next_position(got[-1].position)

    async def locate(self, origin: Position) -> Position | None:
        """The view position of the first entry whose original position is >= ``origin``."""
        return await self.ledger.find_first(lambda e: self.split(e.data)[0] >= origin)


# -- the service ---------------------------------------------------------------------
class CompactionHost(Protocol):
    """What a compactor needs of the broker that runs it (``server.service.BrokerService``)."""

    config: BrokerConfig
    factory: ManagedLedgerFactory
    #: The loaded topics by name.
    topics: dict[str, "Topic"]


class Compactor:
    """Runs compactions and serves the compacted views of one broker's topics."""

    def __init__(self, service: CompactionHost) -> None:
        self.service = service
        self.status: dict[str, dict] = {}
        self._running: dict[str, asyncio.Task] = {}
        self._views: dict[str, CompactedView] = {}
        self._size_at_last: dict[str, int] = {}
        self._monitor: asyncio.Task | None = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # built outside a loop (unit tests): no threshold monitor
            return
        if service.config.compaction_threshold_bytes > 0:
            self._monitor = loop.create_task(self._monitor_loop())

    # -- triggering ------------------------------------------------------------
    def trigger(self, topic: "Topic") -> bool:
        """Start compacting ``topic`` in the background; False if a run is already going."""
        key = str(topic.name)
        task = self._running.get(key)
        if task is not None and not task.done():
            return False
        self.status[key] = {"status": "RUNNING", "lastError": ""}
        task = asyncio.get_running_loop().create_task(self._run(topic))
        self._running[key] = task
        return True

    async def compact(self, topic: "Topic") -> None:
        """Compact now and wait for it (raises what the run raised)."""
        if not self.trigger(topic):
            await asyncio.shield(self._running[str(topic.name)])
            if not self.trigger(topic):  # pragma: no cover (another caller won the race)
                return
        await asyncio.shield(self._running[str(topic.name)])
        if self.status[str(topic.name)]["status"] == "ERROR":
            raise RuntimeError(self.status[str(topic.name)]["lastError"])

    def status_of(self, topic_name: str) -> dict:
        return self.status.get(topic_name, {"status": "NOT_RUN", "lastError": ""})

    async def _monitor_loop(self) -> None:
        config = self.service.config
        while True:
            await asyncio.sleep(config.compaction_check_interval_s)
            for topic in list(self.service.topics.values()):
                if topic.closed:
                    continue
                key = str(topic.name)
                grown = topic.ledger.total_size - self._size_at_last.get(key, 0)
                if grown >= config.compaction_threshold_bytes and topic.ledger.last_confirmed is not None:
                    view = await self._safe_view(topic)
                    if view is None or view.horizon < topic.ledger.last_confirmed:
                        self.trigger(topic)

    async def _safe_view(self, topic: "Topic") -> CompactedView | None:
        try:
            return await self.view(topic)
        except Exception:
            log.exception("cannot open the compacted view of %s", topic.name)
            return None

    # -- the run ------------------------------------------------------------------
    async def _run(self, topic: "Topic") -> None:
        key = str(topic.name)
        try:
            await self._compact(topic)
            self.status[key] = {"status": "SUCCESS", "lastError": ""}
        except asyncio.CancelledError:
            self.status[key] = {"status": "ERROR", "lastError": "cancelled"}
            raise
        except Exception as exc:
            log.exception("compaction of %s failed", key)
            self.status[key] = {"status": "ERROR", "lastError": str(exc) or type(exc).__name__}

    async def _source(self, topic: "Topic", old: CompactedView | None,
                      horizon: Position) -> AsyncIterator[tuple[Position, bytes]]:
        """(original position, entry bytes): the previous view, then the topic up to ``horizon``."""
        ml = topic.ledger
        if old is not None:
            async for _, origin, data in old.entries():
                yield origin, data
            pos = ml.next_position(old.horizon)
        else:
            pos = ml.first_position()
        while pos is not None and pos <= horizon:
            got = await ml.read_entries(pos, _READ_CHUNK)
            got = [e for e in got if e.position <= horizon]
            if not got:
                return
            for e in got:
                yield e.position, e.data
            pos = ml.next_position(got[-1].position)

    async def _compact(self, topic: "Topic") -> None:
        ml = topic.ledger
        factory = self.service.factory
        cursor = ml.cursors.get(CURSOR) or await ml.open_cursor(CURSOR, "earliest")
        horizon = ml.last_confirmed
        old = await self.view(topic)
        size_now = ml.total_size
        if horizon is None or (old is not None and old.horizon >= horizon):
            self._size_at_last[str(topic.name)] = size_now
            return
        # Phase one: the number of the message that holds each key's latest value.
        latest: dict[str, int | None] = {}
        n = 0
        async for _, data in self._source(topic, old, horizon):
            for k, tombstone in _parse(data).keys:
                if k is not None:
                    latest[k] = None if tombstone else n
                n += 1
        keep = {v for v in latest.values() if v is not None}
        del latest
        # Phase two: write the retained messages, in log order, to a new view.
        generation = int(ml.properties.get(PROP_GENERATION, "0")) + 1
        name = f"{ml.name}/__compaction/{generation}"
        if await factory.exists(name):
            await factory.delete(name)  # left by a run that crashed before switching
        out = await factory.open(name)
        pending: list[asyncio.Future] = []
        n = 0
        async for origin, data in self._source(topic, old, horizon):
            parsed = _parse(data)
            indexes = [i for i in range(len(parsed.keys)) if n + i in keep]
            n += len(parsed.keys)
            if not indexes:
                continue
            if parsed.singles is not None and len(indexes) < len(parsed.singles):
                data = _rebuild(data, parsed, indexes)
            pending.append(out.append(_ORIGIN.pack(origin.ledger_id, origin.entry_id) + bytes(data)))
            if len(pending) >= 1000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        await ml.set_properties({PROP_LEDGER: name, PROP_HORIZON: f"{horizon.ledger_id}:{horizon.entry_id}",
                                 PROP_GENERATION: str(generation)})
        self._views[str(topic.name)] = CompactedView(out, horizon)
        self._size_at_last[str(topic.name)] = size_now
        if old is not None:
            try:
                await factory.delete(old.ledger.name)
            except Exception:  # an old view left behind costs disk only
                log.warning("cannot delete the previous compacted view %s", old.ledger.name, exc_info=True)
        await cursor.mark_delete(horizon)
        log.info("compacted %s up to %s: %d entries in %s", topic.name, horizon, out.entry_count, name)

    # -- reading ------------------------------------------------------------------
    async def view(self, topic: "Topic") -> CompactedView | None:
        """The topic's current compacted view (None if it was never compacted)."""
        key = str(topic.name)
        name = topic.ledger.properties.get(PROP_LEDGER)
        if name is None:
            return None
        view = self._views.get(key)
        if view is None or view.ledger.name != name:
            ledger = await self.service.factory.open(name)
            view = CompactedView(ledger, _pos(topic.ledger.properties[PROP_HORIZON]))
            self._views[key] = view
        return view

    async def read(self, dispatcher: "Dispatcher", consumer: "Consumer", want: int) -> list[Entry] | None:
        """Entries of the compacted view for a read_compacted consumer, from its cursor's
        read position; None when that position is past the horizon (read the topic)."""
        topic = dispatcher.subscription.topic
        view = await self.view(topic)
        cursor = dispatcher.cursor
        start = cursor.read_position
        if view is None or start > view.horizon:
            return None
        hint = getattr(dispatcher, "_compacted_hint", None)
        at = hint[1] if hint is not None and hint[0] == start and hint[2] is view else await view.locate(start)
        out: list[Entry] = []
        last_origin = None
        if at is not None:
            async for pos, origin, data in view.entries(at):
                if origin < start:
                    continue
                last_origin = origin
                at = view.ledger.next_position(pos)
                if not cursor.is_deleted(origin):
                    out.append(Entry(origin, data))
                if len(out) >= want:
                    break
            else:
                at = None
        if cursor.read_position != start:
            return []  # moved meanwhile (rewind, seek): read again from there
        if at is None or last_origin is None:
            cursor.seek(topic.ledger.next_position(view.horizon))  # the view is done: the tail follows
            dispatcher._compacted_hint = None  # type: ignore[attr-defined]
        else:
            nxt = topic.ledger.next_position(last_origin)
            cursor.seek(nxt)
            dispatcher._compacted_hint = (nxt, at, view)  # type: ignore[attr-defined]
        return out

    async def last_message_id(self, topic: "Topic") -> pb.MessageIdData:
        """GET_LAST_MESSAGE_ID for read_compacted consumers: the last message they can
        read (the topic's, unless its tail is all compacted away)."""
        view = await self.view(topic)
        last = topic.ledger.last_confirmed
        if view is None or last is None or last > view.horizon:
            return await topic.last_message_id()
        final = view.ledger.last_confirmed
        if final is None:  # nothing survived: an id that says "no message" (entry -1)
            return pb.MessageIdData(ledgerId=view.horizon.ledger_id, entryId=UINT64_MAX)
        got = await view.ledger.read_entries(final, 1)
        origin, data = CompactedView.split(got[0].data)
        mid = pb.MessageIdData(ledgerId=origin.ledger_id, entryId=origin.entry_id)
        n = entry_info(data).num_messages
        if n > 1:
            mid.batch_index = n - 1
        return mid

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
        for task in self._running.values():
            task.cancel()

    async def delete_views(self, topic_name: "TopicName") -> None:
        """Delete every compacted view of a topic (the topic is being deleted)."""
        self._views.pop(str(topic_name), None)
        self.status.pop(str(topic_name), None)
        prefix = f"{topic_name.managed_ledger_name}/__compaction"
        for name in await catalog.names_below(self.service.factory.store, prefix):
            if name.startswith(prefix + "/"):
                try:
                    await self.service.factory.delete(name)
                except Exception:
                    log.warning("cannot delete compacted view %s", name, exc_info=True)
