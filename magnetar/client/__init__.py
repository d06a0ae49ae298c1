"""Magnetar's Pulsar client: asyncio underneath, a blocking facade on top.

Names follow the official ``pulsar`` package, so switching is an import::

    from magnetar import client as pulsar
    c = pulsar.Client("pulsar://localhost:6650")
    p = c.create_producer("my-topic")
    p.send(b"hello")

- :mod:`.sync`       Client, Producer, Consumer, Reader (blocking)
- :mod:`.aio`        AsyncClient; :mod:`.producer`, :mod:`.consumer`, :mod:`.reader`
- :mod:`.connection` the socket (TCP or TLS) shell around ``magnetar.protocol``
- :mod:`.link`       registration on a broker and reconnects
- :mod:`.batch_builder`, :mod:`.inbound`  entries out, messages in
- :mod:`.idempotence` idempotent producers: pid leases, sequence numbers
- :mod:`.partitioned`, :mod:`.partition_routing`  partitioned topics: one link per partition
- :mod:`.acks`       ack bookkeeping; :mod:`.backoff` reconnect delays
- :mod:`.auth`       AuthenticationToken, AuthenticationBasic, AuthenticationTLS
- :mod:`.errors`     exceptions and Result codes
"""
from .aio import AsyncClient
from .auth import AuthenticationBasic, AuthenticationTLS, AuthenticationToken
from .consumer import AsyncConsumer
from .enums import CompressionType, ConsumerType, InitialPosition, ProducerAccessMode
from .errors import *  # noqa: F401,F403  (the exception names, like pulsar's)
from .errors import ExpectedOffsetMismatch, PulsarError, PulsarException, Result
from .message import Message
from .message_id import MessageId
from .partition_routing import HashingScheme, PartitionsRoutingMode
from .partitioned import PartitionedConsumer, PartitionedProducer
from .producer import AsyncProducer
from .reader import AsyncReader
from .sync import Client, Consumer, Producer, Reader

__all__ = [
    "Client", "Producer", "Consumer", "Reader", "AsyncClient", "AsyncProducer", "AsyncConsumer",
    "AsyncReader", "Message", "MessageId", "CompressionType", "ConsumerType", "InitialPosition",
    "ProducerAccessMode", "Result", "PulsarError", "PulsarException", "ExpectedOffsetMismatch",
    "AuthenticationToken", "AuthenticationBasic", "AuthenticationTLS", "PartitionsRoutingMode", "HashingScheme",
    "PartitionedProducer", "PartitionedConsumer",
]
