"""A producer's reports to a client that has left are dropped, never raised:
storage fails a run of entries through one callback, and a report that
raised part-way left the rest of the run unanswered in the topic's queue
and the topic not reloaded (``Topic._on_store_failed``).

Found in the object storage soak's broker logs (docs/reliability.md): "an
append's callback failed on an error ... ProtocolError: connection is
closed" when a fenced ledger's pending sends were failed after their
client had disconnected."""
from __future__ import annotations

from magnetar.broker.server.connection import ServerConnection
from magnetar.broker.server.handlers.produce import ProducerReports
from magnetar.broker.topics.producer import PendingSend, Producer
from magnetar.protocol import pb
from magnetar.storage import StorageError

from .harness import close_service, make_service, topic_of


async def test_reports_to_a_closed_connection_are_dropped(tmp_path):
    service = await make_service(tmp_path)
    try:
        topic = await topic_of(service, "reports-after-disconnect")
        connection = ServerConnection(service)
        sink = ProducerReports(connection)
        producer = Producer(producer_id=1, name="p", topic=topic, access_mode=pb.Shared, sink=sink)
        connection.producers[1] = producer
        connection.pending_sends = 2
        connection.connection_lost(None)  # the client left with two sends pending
        assert connection.proto.closed
        failed, stored = PendingSend(0, 0, producer), PendingSend(1, 1, producer)
        failed.failed(StorageError("ledger 173 was fenced by a new owner"))
        sink.send_result(producer, failed)  # raised ProtocolError: connection is closed
        stored.stored(5, 0, 0, 1)
        sink.send_result(producer, stored)
        sink.closed(producer)
        assert connection.pending_sends == 0
    finally:
        await close_service(service)
