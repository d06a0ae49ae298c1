"""Reading a request: names in the path, query flags, JSON bodies.

Every function raises :class:`~.errors.AdminError` with a clear reason, before
anything is changed: 412 for an invalid tenant, namespace or topic name (as
Pulsar), 400 for a malformed body, query or number.
"""
from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.broker.topic_name import InvalidTopicName, TopicName, parse

from .errors import AdminError, bad_request, precondition_failed

MAX_BODY = 1024 * 1024


def tenant_of(request: web.Request) -> str:
    tenant = request.match_info["tenant"]
    try:
        resources.check_name("tenant", tenant)
    except resources.InvalidInput as exc:
        raise precondition_failed(str(exc)) from None
    return tenant


def namespace_of(request: web.Request) -> str:
    namespace = f"{request.match_info['tenant']}/{request.match_info['namespace']}"
    try:
        resources.split_namespace(namespace)
    except resources.InvalidInput as exc:
        raise precondition_failed(str(exc)) from None
    return namespace


def topic_of(request: web.Request) -> TopicName:
    """The persistent topic named by ``{tenant}/{namespace}/{topic}``."""
    raw = "persistent://{tenant}/{namespace}/{topic}".format(**request.match_info)
    try:
        return parse(raw)
    except InvalidTopicName as exc:
        raise precondition_failed(f"Topic name is not valid: {exc}") from None


def flag(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter (``?force=true``)."""
    value = request.query.get(name)
    if value is None or value == "":
        return default
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise bad_request(f"query parameter {name} must be true or false, got {value!r}")


def int_in_path(request: web.Request, name: str, low: int = 0) -> int:
    text = request.match_info[name]
    try:
        value = int(text)
    except ValueError:
        raise bad_request(f"{name} must be an integer, got {text!r}") from None
    if value < low:
        raise bad_request(f"{name} must be >= {low}, got {value}")
    return value


async def json_body(request: web.Request, required: bool = True) -> Any:
    """The decoded JSON body; None when absent and not required."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise bad_request(f"request body larger than {MAX_BODY} bytes")
    raw = await request.read()
    if len(raw) > MAX_BODY:
        raise bad_request(f"request body larger than {MAX_BODY} bytes")
    if not raw.strip():
        if required:
            raise bad_request("a JSON request body is required")
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"malformed JSON body: {exc}") from None


def message_id(body: Any) -> tuple[int, int, bool]:
    """``(ledger_id, entry_id, excluded)`` from Pulsar's MessageId JSON
    (``{"ledgerId", "entryId", "partitionIndex", "isExcluded"}``), or from the
    strings ``"earliest"`` / ``"latest"`` (Pulsar's sentinels: -1 / Long.MAX)."""
    if body == "earliest":
        return -1, -1, False
    if body == "latest":
        return (1 << 63) - 1, (1 << 63) - 1, False
    if not isinstance(body, dict):
        raise bad_request('message id must be {"ledgerId": L, "entryId": E} or "earliest" / "latest"')
    ledger_id, entry_id = body.get("ledgerId"), body.get("entryId")
    for name, value in (("ledgerId", ledger_id), ("entryId", entry_id)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad_request(f"message id field {name} must be an integer, got {value!r}")
    excluded = body.get("isExcluded", False)
    if not isinstance(excluded, bool):
        raise bad_request(f"isExcluded must be true or false, got {excluded!r}")
    return ledger_id, entry_id, excluded


#: The application's Broker (``magnetar.broker.server.server.Broker``).
BROKER = web.AppKey("broker", object)


def service_of(request: web.Request):
    """The broker's BrokerService (503 while the broker is not serving)."""
    service = request.app[BROKER].service
    if service is None or service.closing:
        raise AdminError(503, "broker is not serving")
    return service


def store_of(request: web.Request):
    return request.app[BROKER].store
