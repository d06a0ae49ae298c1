"""Non-persistent topics (``non-persistent://``): delivered, never stored.

Pulsar's contract, kept here: a message goes at once to the consumers that
are connected and have permits, and is gone. Nothing is written, so there is
no backlog, no redelivery, no seek, no cursor, and acknowledgements are
accepted and ignored. A subscription with no consumer that can take a
message drops it (counted: ``msgDropRate`` in the stats). The receipt a
producer gets names position 0:0, as Pulsar's does: there is no position.

Dispatch per subscription type: Exclusive and Failover give every message to
the active consumer (the first connected, Failover: the lowest priority
level); Shared to the next consumer with permits, round robin; Key_Shared to
the consumer the message's key hashes to among the connected ones (a hash
over the consumer list, not Pulsar's hash ranges: keys move when consumers
come and go).

Producers are Shared only: exclusive access needs the topic epoch, which is
stored, and nothing is stored here (NotAllowed, saying so). A topic lives
while the broker serves it; it is loaded on first use, in memory.
"""
from __future__ import annotations

import asyncio
import itertools
import time
import zlib
from typing import TYPE_CHECKING, Any

from magnetar.broker.entries.entry_format import build_entry
from magnetar.broker.entries.message_peek import sticky_key
from magnetar.broker.errors import ConsumerBusy, NotAllowed, ProducerBusy, ServiceNotReady
from magnetar.protocol import pb
from magnetar.storage import Entry, Position

from .producer import AccessMode, PendingSend, Producer
from .stats import RateMeter

if TYPE_CHECKING:
    from magnetar.broker.subscriptions.consumer import Consumer
    from magnetar.broker.topic_name import TopicName

#: Where every non-persistent message "is": Pulsar answers 0:0 too.
NOWHERE = Position(0, 0)
_Sub = pb.CommandSubscribe


class NonPersistentSubscription:
    """Consumers sharing a name on a non-persistent topic; no cursor."""

    durable = False
    cursor = None  # nothing is stored: no mark-delete position, no batch acks

    def __init__(self, topic: "NonPersistentTopic", name: str, sub_type: int) -> None:
        self.topic = topic
        self.name = name
        self.type = sub_type
        self.consumers: list[Consumer] = []
        self._turn = itertools.count()
        self.msg_out = 0
        self.bytes_out = 0
        self.dropped = 0
        self.rates = RateMeter()

    # -- consumers -------------------------------------------------------------------
    def add_consumer(self, consumer: "Consumer", sub_type: int) -> None:
        if sub_type != self.type:
            raise ConsumerBusy(f"subscription {self.name} is {_Sub.SubType.Name(self.type)}, "
                               f"not {_Sub.SubType.Name(sub_type)}")
        if self.type == _Sub.Exclusive and self.consumers:
            raise ConsumerBusy(f"exclusive subscription {self.name} already has a consumer")
        self.consumers.append(consumer)
        if self.type == _Sub.Failover:
            self.consumers.sort(key=lambda c: c.priority_level)

    def remove_consumer(self, consumer: "Consumer") -> None:
        consumer.closed = True
        if consumer in self.consumers:
            self.consumers.remove(consumer)

    def close(self) -> None:
        for consumer in list(self.consumers):
            consumer.disconnect()
        self.consumers.clear()

    # -- what a persistent subscription does, and this one has nothing to do for ------
    def on_new_entries(self) -> None:
        """FLOW: permits count from now on; nothing waits to be delivered."""

    async def acknowledge(self, positions: list[Position]) -> None:
        """Nothing to acknowledge: delivered messages are gone already."""

    async def acknowledge_cumulative(self, position: Position) -> None:
        """As :meth:`acknowledge`."""

    async def acknowledge_batch_index(self, position: Position, mask: int) -> None:
        """As :meth:`acknowledge`."""

    def redeliver(self, consumer: "Consumer", positions: list[Position] | None) -> None:
        """Nothing is kept to deliver again (Pulsar ignores this too)."""

    async def reset_cursor(self, position: Position) -> None:
        raise NotAllowed(f"{self.topic.name}: a non-persistent topic keeps no messages to seek to")

    def backlog(self) -> int:
        return 0

    # -- dispatch ----------------------------------------------------------------------
    def dispatch(self, entry: Entry, count: int) -> None:
        """Give ``entry`` (``count`` messages) to one consumer, or drop it."""
        consumer = self._pick(entry)
        if consumer is None:
            self.dropped += count
            return
        consumer.permits -= count
        consumer.msg_out += count
        consumer.bytes_out += len(entry.data)
        self.msg_out += count
        self.bytes_out += len(entry.data)
        consumer.sink.deliver(consumer, [entry], [0])

    def _pick(self, entry: Entry) -> "Consumer | None":
        consumers = self.consumers
        if not consumers:
            return None
        if self.type in (_Sub.Exclusive, _Sub.Failover):
            active = consumers[0]
            return active if active.can_receive() else None
        if self.type == _Sub.Key_Shared:
            chosen = consumers[zlib.crc32(sticky_key(entry.data)) % len(consumers)]
            return chosen if chosen.can_receive() else None
        start = next(self._turn)
        for step in range(len(consumers)):
            candidate = consumers[(start + step) % len(consumers)]
            if candidate.can_receive():
                return candidate
        return None


class NonPersistentTopic:
    """A topic whose messages only pass through (see the module docstring)."""

    #: Publish rates are applied to persistent topics only.
    publish_limiter = None

    #: Nothing stored: schemas accept a consumer's schema on an idle topic.
    stored_entries = 0
    terminated_at = None

    def __init__(self, service: Any, name: "TopicName") -> None:
        self.service = service
        self.name = name
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, NonPersistentSubscription] = {}
        self.closed = False
        self.msg_in = 0
        self.bytes_in = 0
        self.rates = RateMeter()
        self._sequence = itertools.count()

    def _check_open(self) -> None:
        if self.closed:
            raise ServiceNotReady(f"topic {self.name} is being unloaded; retry")

    # -- producers ---------------------------------------------------------------------
    async def add_producer(self, producer: Producer, requested_epoch: int | None) -> asyncio.Future | None:
        self._check_open()
        if producer.access_mode != AccessMode.Shared:
            raise NotAllowed(f"{self.name}: exclusive producers need a persistent topic "
                             "(the topic epoch that fences them is stored)")
        if producer.name in self.producers:
            raise ProducerBusy(f"producer with name '{producer.name}' is already connected to {self.name}")
        producer.connected_since = time.time()
        self.producers[producer.name] = producer
        return None

    def last_sequence_id(self, producer_name: str, deduplicate: bool = False) -> int:
        return -1  # no history: nothing is stored to deduplicate against

    def remove_producer(self, producer: Producer) -> None:
        producer.fenced = True
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]

    def publish(self, producer: Producer, send: pb.CommandSend, block: Any) -> asyncio.Future:
        """:meth:`publish_into` with a future of :class:`PublishResult`."""
        result = asyncio.get_running_loop().create_future()
        pending = PendingSend(send.sequence_id, send.highest_sequence_id)
        self.publish_into(producer, send, block, pending, int(time.time() * 1000))
        if pending.error is not None:
            result.set_exception(pending.error)
        else:
            result.set_result(pending.result())
        return result

    def publish_into(self, producer: Producer, send: pb.CommandSend, block: Any, pending: PendingSend,
                     received_ms: int) -> None:
        """Hand the entry to every subscription now; the receipt names 0:0.
        Settles ``pending`` before it returns. ``received_ms``: the publish time."""
        if self.closed or self.producers.get(producer.name) is not producer:
            pending.failed(ServiceNotReady(f"topic {self.name} is being unloaded; retry"))
            return
        n = max(1, send.num_messages)
        data = build_entry(block.checksummed, received_ms, next(self._sequence), n)
        self.msg_in += n
        self.bytes_in += len(data)
        producer.msg_in += n
        producer.bytes_in += len(data)
        entry = Entry(NOWHERE, data)
        for sub in list(self.subscriptions.values()):
            sub.dispatch(entry, n)
        pending.stored(NOWHERE.ledger_id, NOWHERE.entry_id, 0, n)

    # -- subscriptions -------------------------------------------------------------------
    async def subscribe(self, name: str, sub_type: int, consumer: "Consumer", *, durable: bool = True,
                        initial_position: int = _Sub.Latest, start_message_id: Any = None,
                        replicated: bool = False) -> NonPersistentSubscription:
        self._check_open()
        if consumer.read_compacted:
            raise NotAllowed(f"{self.name}: read_compacted needs a persistent topic")
        sub = self.subscriptions.get(name)
        if sub is None:
            sub = self.subscriptions[name] = NonPersistentSubscription(self, name, sub_type)
        consumer.subscription = sub  # type: ignore[assignment]
        sub.add_consumer(consumer, sub_type)
        return sub

    def remove_consumer(self, consumer: "Consumer") -> None:
        sub = consumer.subscription
        sub.remove_consumer(consumer)  # type: ignore[arg-type]
        if not sub.consumers and self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]  # nothing to remember for it: Pulsar drops it too

    async def unsubscribe(self, name: str) -> None:
        sub = self.subscriptions.pop(name, None)
        if sub is not None:
            sub.close()

    async def last_message_id(self) -> pb.MessageIdData:
        raise NotAllowed(f"{self.name}: a non-persistent topic has no last message")

    async def close(self) -> None:
        """Disconnect producers and consumers (they reconnect and load it again)."""
        if self.closed:
            return
        self.closed = True
        for producer in list(self.producers.values()):
            self.producers.pop(producer.name, None)
            producer.disconnect()
        for sub in list(self.subscriptions.values()):
            sub.close()
        self.subscriptions.clear()

    # -- stats -------------------------------------------------------------------------
    def stats(self) -> dict:
        """Pulsar's NonPersistentTopicStats fields that apply."""
        rate_in, throughput_in = self.rates.rates((self.msg_in, self.bytes_in))
        subs = {}
        for name, sub in self.subscriptions.items():
            rate_out, throughput_out, drop_rate = sub.rates.rates((sub.msg_out, sub.bytes_out, sub.dropped))
            subs[name] = {
                "type": _Sub.SubType.Name(sub.type), "msgRateOut": rate_out, "msgThroughputOut": throughput_out,
                "msgOutCounter": sub.msg_out, "bytesOutCounter": sub.bytes_out, "msgDropRate": drop_rate,
                "msgDropCounter": sub.dropped,
                "msgBacklog": 0, "consumers": [{"consumerName": c.name, "availablePermits": c.permits,
                                                "msgOutCounter": c.msg_out} for c in sub.consumers],
            }
        return {
            "msgRateIn": rate_in, "msgThroughputIn": throughput_in, "msgInCounter": self.msg_in,
            "bytesInCounter": self.bytes_in, "storageSize": 0, "backlogSize": 0,
            "msgDropRate": sum(s["msgDropRate"] for s in subs.values()),
            "publishers": [{"producerName": p.name, "msgInCounter": p.msg_in} for p in self.producers.values()],
            "subscriptions": subs,
        }
