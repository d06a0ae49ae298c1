"""A no-op Pulsar-protocol server: the load generator's ceiling.

It speaks just enough of the protocol for a producer (CONNECT, lookup,
PRODUCER, SEND, PING, CLOSE_PRODUCER) and answers every SEND with a receipt
at once, storing nothing. One SEND frame costs it one command parse and one
receipt, so with batching it absorbs millions of msg/s and whatever rate a
producer reaches against it is the producer's own limit. It has no consumer
side: consumer-side limits are read from the workers' CPU use instead.

Failure modes: any other command gets an ERROR (NotAllowed); bytes that
break framing close that connection only.
"""
from __future__ import annotations

import asyncio
import logging

from magnetar.protocol import Connection, ProtocolError, Role, ServerError, pb
from magnetar.protocol.commands import Type, command, error, message_id, success

log = logging.getLogger(__name__)
Lookup = pb.CommandLookupTopicResponse
Partitions = pb.CommandPartitionedTopicMetadataResponse


class SinkConnection(asyncio.Protocol):
    def __init__(self, service_url: str) -> None:
        self.service_url = service_url
        self.proto = Connection(Role.SERVER, max_frame_size=6 * 1024 * 1024)
        self.transport: asyncio.Transport | None = None
        self.entry = 0

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.proto.receive_data(data)
        except ProtocolError as exc:
            log.warning("sink: closing connection: %s", exc)
            self.transport.close()
            return
        out = [self.proto.send(reply) for reply in map(self._answer, frames) if reply is not None]
        if out:
            self.transport.writelines(out)

    def _answer(self, frame) -> pb.BaseCommand | None:
        cmd = frame.command
        t = cmd.type
        if t == Type.SEND:
            send = cmd.send
            self.entry += 1
            return command(Type.SEND_RECEIPT, producer_id=send.producer_id, sequence_id=send.sequence_id,
                           highest_sequence_id=send.highest_sequence_id, message_id=message_id(0, self.entry))
        if t == Type.CONNECT:
            return command(Type.CONNECTED, server_version="magnetar-perf-sink", protocol_version=20,
                           max_message_size=5 * 1024 * 1024)
        if t == Type.PING:
            return command(Type.PONG)
        if t == Type.PONG:
            return None
        if t == Type.PARTITIONED_METADATA:
            return command(Type.PARTITIONED_METADATA_RESPONSE, request_id=cmd.partitionMetadata.request_id,
                           partitions=0, response=Partitions.Success)
        if t == Type.LOOKUP:
            return command(Type.LOOKUP_RESPONSE, request_id=cmd.lookupTopic.request_id, response=Lookup.Connect,
                           brokerServiceUrl=self.service_url, authoritative=True, proxy_through_service_url=True)
        if t == Type.PRODUCER:
            req = cmd.producer
            return command(Type.PRODUCER_SUCCESS, request_id=req.request_id,
                           producer_name=req.producer_name or f"sink-{req.producer_id}",
                           last_sequence_id=-1, producer_ready=True)
        if t == Type.CLOSE_PRODUCER:
            return success(cmd.close_producer.request_id)
        body = getattr(cmd, cmd.DESCRIPTOR.fields_by_number[t].name, None) \
            if t in cmd.DESCRIPTOR.fields_by_number else None
        request_id = getattr(body, "request_id", None)
        if request_id is None:
            return None
        return error(request_id, ServerError.NotAllowedError, "the perf sink only takes producers")


async def start_sink(host: str = "127.0.0.1", port: int = 0) -> tuple[asyncio.AbstractServer, int]:
    """Listen on ``host:port`` (0 = a free port); returns the server and its port."""
    loop = asyncio.get_running_loop()
    holder: dict = {}
    server = await loop.create_server(lambda: SinkConnection(holder["url"]), host, port)
    real = server.sockets[0].getsockname()[1]
    holder["url"] = f"pulsar://{host}:{real}"
    return server, real


def serve(port_queue=None, host: str = "127.0.0.1", port: int = 0) -> None:
    """Run a sink until killed; puts its port on ``port_queue`` (or prints a READY line)."""
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run

    async def main() -> None:
        server, real = await start_sink(host, port)
        if port_queue is not None:
            port_queue.put(real)
        else:
            print(f"READY pulsar={real}", flush=True)
        async with server:
            await server.serve_forever()

    runner(main())
