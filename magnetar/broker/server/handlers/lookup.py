"""Handshake and discovery: CONNECT, PING, LOOKUP, PARTITIONED_METADATA,
GET_TOPICS_OF_NAMESPACE.

A standalone broker owns every topic, so LOOKUP answers Connect with the URL
the client dialled. A client that names a listener (``listener_name``) is
sent to that one of the broker's ``advertised_listeners`` (ServiceNotReady
for a name the broker does not have, as in Pulsar). A cluster member answers with the owner of the topic's
bundle (``cluster.member``): Connect when it is the owner, Redirect
(authoritative) to the owner otherwise, as Pulsar's brokers do. Failure modes: a malformed topic name gets
InvalidTopicName; a region outside the topic's replication clusters gets
NotAllowedError saying the namespace is not served in this cluster
(``namespaces.serving``); metadata trouble gets ServiceNotReady (the client
retries).
"""
from __future__ import annotations

import time

import logging
import re

from magnetar import __version__
from magnetar.broker.errors import BrokerError
from magnetar.broker.topic_name import InvalidTopicName, parse
from magnetar.protocol import ServerError, pb
from magnetar.protocol.commands import Type, command, error
from magnetar.protocol.frames import Frame

from .. import lifecycle, topic_list
from . import auth
from .session import ClientSession, topic_name

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 20


def on_connect(session: ClientSession, frame: Frame) -> None:
    if not auth.on_connect(session, frame):
        return  # refused: answered and closed
    session.client_version = frame.command.connect.client_version
    version = min(PROTOCOL_VERSION, frame.command.connect.protocol_version or PROTOCOL_VERSION)
    session.write(
           command(
               Type.CONNECTED,
               server_version=f"Magnetar {__version__}",
               protocol_version=version,
               max_message_size=session.config.max_message_size,
               feature_flags=pb.FeatureFlags(supports_broker_entry_metadata=True),
           )
       )


def on_ping(session: ClientSession, frame: Frame) -> None:
    session.write(command(Type.PONG))


async def on_partitioned_metadata(session: ClientSession, req: pb.CommandPartitionedTopicMetadata) -> None:
    Lookup = pb.CommandPartitionedTopicMetadataResponse
    try:
        await session.service.check_served_here(topic_name(req.topic))
        partitions = await lifecycle.partitioned_metadata(
            session.service, topic_name(req.topic), auto_create=req.metadata_auto_creation_enabled)
    except BrokerError as exc:
        session.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id,
                              response=Lookup.Failed, error=exc.code, message=str(exc)))
        return
    except Exception as exc:  # metadata trouble: the client retries ServiceNotReady
        log.exception("partitioned metadata of %s failed", req.topic)
        session.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id,
                              response=Lookup.Failed, error=ServerError.ServiceNotReady, message=str(exc)))
        return
    session.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=req.request_id, partitions=partitions,
                          response=Lookup.Success))


def on_lookup(session: ClientSession, frame: Frame) -> None:
    req = frame.command.lookupTopic
    Lookup = pb.CommandLookupTopicResponse
    try:
        parse(req.topic)
    except InvalidTopicName as exc:
        session.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Failed,
                              error=ServerError.InvalidTopicName, message=str(exc)))
        return
    if session.service.cluster is not None:
        session.spawn(cluster_lookup(session, req))
        return
    session.service.lookup_answers += 1
    session.service.lookup_seconds.observe(0.0)  # one broker owns everything: answered at once
    if req.advertised_listener_name:
        # The client asked for a named address: send it there.
        url = session.config.listeners.get(req.advertised_listener_name)
        if url is None:
            session.write(_no_listener(req))
            return
        session.write(_connect_to(req, url, Lookup.Connect))
        return
    # One broker owns everything: the client keeps using the URL it dialled.
    session.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Connect,
                          brokerServiceUrl=session.config.service_url, authoritative=True,
                          proxy_through_service_url=True))


def _no_listener(req: pb.CommandLookupTopic) -> pb.BaseCommand:
    # Pulsar answers a listener it does not have with ServiceNotReady.
    return command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=pb.CommandLookupTopicResponse.Failed,
                   error=ServerError.ServiceNotReady,
                   message=f"the broker has no listener named {req.advertised_listener_name!r}: "
                           f"check the client's listener_name against advertised_listeners")


def _connect_to(req: pb.CommandLookupTopic, url: str, response: int) -> pb.BaseCommand:
    field = "brokerServiceUrlTls" if url.startswith("pulsar+ssl://") else "brokerServiceUrl"
    return command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=response, authoritative=True,
                   **{field: url})


async def cluster_lookup(session: ClientSession, req: pb.CommandLookupTopic) -> None:
    Lookup = pb.CommandLookupTopicResponse
    started = time.monotonic()
    try:
        name = parse(req.topic)
        await session.service.check_served_here(name)
        result = await session.service.cluster.lookup(name)
    except BrokerError as exc:
        session.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Failed,
                              error=exc.code, message=str(exc)))
        return
    except Exception as exc:  # metadata trouble: the client retries ServiceNotReady
        log.exception("lookup of %s failed", req.topic)
        session.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=Lookup.Failed,
                              error=ServerError.ServiceNotReady, message=f"lookup failed: {exc}"))
        return
    session.service.lookup_answers += 1
    session.service.lookup_seconds.observe(time.monotonic() - started)
    if not result.local:
        session.service.lookup_redirects += 1
    # Redirect makes the client ask the owner, which then answers Connect.
    response = Lookup.Connect if result.local else Lookup.Redirect
    if req.advertised_listener_name:
        url = result.listeners.get(req.advertised_listener_name)
        session.write(_no_listener(req) if url is None else _connect_to(req, url, response))
        return
    # Both URLs, as Pulsar: a TLS client follows brokerServiceUrlTls, a plain one brokerServiceUrl.
    urls = {"brokerServiceUrlTls": result.service_url_tls} if result.service_url_tls else {}
    session.write(command(Type.LOOKUP_RESPONSE, request_id=req.request_id, response=response,
                          brokerServiceUrl=result.service_url, authoritative=True, **urls))


async def on_get_topics(session: ClientSession, req: pb.CommandGetTopicsOfNamespace) -> None:
    try:
        # RegexSubscriptionMode: PERSISTENT (the default), NON_PERSISTENT or ALL.
        # Non-persistent topics exist while served: this broker's are listed.
        topics: list[str] = []
        if req.mode != pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
            topics = await lifecycle.namespace_topics(session.service, req.namespace)
        if req.mode != pb.CommandGetTopicsOfNamespace.PERSISTENT:
            topics += session.service.non_persistent_topics_of(req.namespace)
    except Exception as exc:
        log.info("topics of namespace %r refused: %s", req.namespace, exc)
        session.write(error(req.request_id, ServerError.MetadataError, f"cannot list {req.namespace!r}: {exc}"))
        return
    filtered = False
    if req.HasField("topics_pattern"):
        try:
            topics = topic_list.filter_topics(topics, req.topics_pattern)
            filtered = True
        except re.error as exc:  # the client filters an unfiltered list itself
            log.info("ignoring bad topics pattern %r from %s: %s", req.topics_pattern, session.peer, exc)
    digest = topic_list.topics_hash(topics)
    if req.HasField("topics_hash") and req.topics_hash == digest:
        session.write(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=req.request_id,
                              filtered=filtered, topics_hash=digest, changed=False))
        return
    session.write(command(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=req.request_id, topics=topics,
                          filtered=filtered, topics_hash=digest, changed=True))
