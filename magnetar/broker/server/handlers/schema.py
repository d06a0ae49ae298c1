"""Schemas on the binary protocol: GET_SCHEMA and GET_OR_CREATE_SCHEMA.

The registry (``topics.schemas``) does the work; a refusal travels in the
response's error fields, as Pulsar's client expects. A storage or metadata
failure (etcd out of reach) answers ServiceNotReady, which the client
retries: a handler always answers.
"""
from __future__ import annotations

import logging

from magnetar.broker.errors import BrokerError
from magnetar.metadata import MetadataError
from magnetar.protocol import ServerError, pb
from magnetar.storage import StorageError
from magnetar.protocol.commands import Type, command

from .session import ClientSession, topic_name

log = logging.getLogger(__name__)


async def on_get_schema(session: ClientSession, req: pb.CommandGetSchema) -> None:
    try:
        fields = await session.service.schemas.get_schema_response(req, topic_name(req.topic))
    except BrokerError as exc:
        fields = {"error_code": exc.code, "error_message": str(exc)}
    except (StorageError, MetadataError, OSError) as exc:
        log.warning("schema of %s: storage: %s", req.topic, exc)
        fields = {"error_code": ServerError.ServiceNotReady, "error_message": f"schema store unavailable: {exc}"}
    session.write(command(Type.GET_SCHEMA_RESPONSE, request_id=req.request_id, **fields))


async def on_get_or_create_schema(session: ClientSession, req: pb.CommandGetOrCreateSchema) -> None:
    try:
        fields = await session.service.schemas.get_or_create_response(req, topic_name(req.topic))
    except BrokerError as exc:
        fields = {"error_code": exc.code, "error_message": str(exc)}
    except (StorageError, MetadataError, OSError) as exc:
        log.warning("schema of %s: storage: %s", req.topic, exc)
        fields = {"error_code": ServerError.ServiceNotReady, "error_message": f"schema store unavailable: {exc}"}
    session.write(command(Type.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=req.request_id, **fields))
