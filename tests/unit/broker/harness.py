"""Real broker objects in one process (no sockets): a service on a temp dir."""
from __future__ import annotations

from pathlib import Path

from magnetar.broker.config import BrokerConfig
from magnetar.broker.topics.producer import PendingSend, Producer
from magnetar.broker.server.service import BrokerService
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore, MetadataStore
from magnetar.protocol import pb
from magnetar.protocol.frames import PayloadBlock, checksummed_block
from magnetar.storage import ManagedLedgerFactory


async def make_service(data_dir: Path, store: MetadataStore | None = None, **overrides) -> BrokerService:
    config = BrokerConfig(data_dir=str(data_dir), **overrides)
    store = store or MemoryMetadataStore()
    factory = ManagedLedgerFactory(Path(data_dir), store, config.storage)
    from magnetar.broker.namespaces import resources

    await resources.bootstrap(store, config.cluster_name, {})  # public/default, as standalone has
    return BrokerService(config, store, factory)


async def close_service(service: BrokerService) -> None:
    await service.close()
    await service.factory.close()


async def topic_of(service: BrokerService, name: str = "t"):
    return await service.get_topic(parse(name))


def producer(topic, pid: int, name: str | None = None, mode: int = pb.Shared, idempotent: bool = False) -> Producer:
    return Producer(producer_id=pid, name=name or f"p{pid}", topic=topic, access_mode=mode, idempotent=idempotent)


class RecordingSink:
    """A producer's sink (``topics.producer.ProducerSink``) that keeps what its
    client would hear: reports in order, and the broker's closes."""

    def __init__(self, on_closed=None) -> None:
        self.results: list[PendingSend] = []
        self.closes: list[tuple[Producer, tuple[str, str] | None]] = []
        self._on_closed = on_closed

    def send_result(self, producer: Producer, pending: PendingSend) -> None:
        self.results.append(pending)

    def closed(self, producer: Producer, assigned: tuple[str, str] | None = None) -> None:
        self.closes.append((producer, assigned))
        if self._on_closed is not None:
            self._on_closed()


def send_of(producer_name: str, seq: int, payload: bytes = b"x", n: int = 1, *, expected_offset: int | None = None,
            pid: int = 0, generation: int = 0, pid_sequence: int = 0, offset_epoch: int = 0) -> tuple[pb.CommandSend, PayloadBlock]:
    md = pb.MessageMetadata(producer_name=producer_name, sequence_id=seq, publish_time=1)
    if n > 1:
        md.num_messages_in_batch = n
    if pid:
        md.magnetar_pid, md.magnetar_generation, md.magnetar_sequence = pid, generation, pid_sequence
    send = pb.CommandSend(producer_id=0, sequence_id=seq, num_messages=n)
    if n > 1:
        send.highest_sequence_id = seq + n - 1
    if expected_offset is not None:
        send.expected_offset = expected_offset
        send.offset_epoch = offset_epoch
    return send, PayloadBlock(memoryview(checksummed_block(md.SerializeToString(), payload)))
