"""Refusing a command whose text fields are not valid UTF-8.

Checked by the connection shell before routing, for the commands that carry
names (not for SEND, ACK or FLOW: their hot paths carry no text). The answer
is the command's own failure response where it has one (LOOKUP,
PARTITIONED_METADATA), else ERROR for its request id: InvalidTopicName for a
topic field, NotAllowedError for any other; the connection stays open.
"""
from __future__ import annotations

import logging

from magnetar.protocol import ServerError, pb
from magnetar.protocol.commands import Type, body, command, error, type_name
from magnetar.protocol.frames import Frame
from magnetar.protocol.text_fields import first_undecodable

from .session import ClientSession

log = logging.getLogger(__name__)

#: Commands whose fields name topics, namespaces, producers, subscriptions, schemas.
NAMED = frozenset({
    Type.LOOKUP, Type.PARTITIONED_METADATA, Type.PRODUCER, Type.SUBSCRIBE,
    Type.GET_TOPICS_OF_NAMESPACE, Type.GET_SCHEMA, Type.GET_OR_CREATE_SCHEMA, Type.GET_NEXT_OFFSET,
    Type.FETCH_ENTRIES,
    Type.LEASE_PID, Type.LEASE_PID_BATCH, Type.UNSUBSCRIBE, Type.SEEK,
})


def refuse_if_malformed(session: ClientSession, frame: Frame) -> bool:
    """Answer and return True when ``frame``'s command has undecodable text."""
    req = body(frame.command)
    field = first_undecodable(req)
    if field is None:
        return False
    name = type_name(frame.command)
    message = f"{name}: field {field} is not valid UTF-8"
    code = ServerError.InvalidTopicName if "topic" in field else ServerError.NotAllowedError
    log.info("refusing %s from %s: %s", name, session.peer, message)
    request_id = getattr(req, "request_id", None)
    kind = frame.command.type
    if kind == Type.LOOKUP:
        session.write(command(Type.LOOKUP_RESPONSE, request_id=request_id,
                              response=pb.CommandLookupTopicResponse.Failed, error=code, message=message))
    elif kind == Type.PARTITIONED_METADATA:
        session.write(command(Type.PARTITIONED_METADATA_RESPONSE, request_id=request_id,
                              response=pb.CommandPartitionedTopicMetadataResponse.Failed, error=code,
                              message=message))
    elif request_id is not None:
        session.write(error(request_id, code, message))
    return True
