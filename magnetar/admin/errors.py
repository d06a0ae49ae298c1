"""Errors of the admin API: every failure is JSON ``{"reason": "..."}`` with
Pulsar's HTTP status.

Handlers raise; the middleware here turns exceptions into answers:

- :class:`AdminError` (and its helpers) carry their own status;
- resource errors from :mod:`magnetar.broker.namespaces.resources`: ResourceNotFound 404,
  AlreadyExists / NotEmpty 409, InvalidInput 400, PreconditionFailed 412,
  Forbidden 403;
- broker refusals (:class:`~magnetar.broker.errors.BrokerError`): TopicNotFound
  404, ServiceNotReady 503, NotAllowed 405, other refusals 412;
- aiohttp's own (unknown path 404, wrong method 405) keep their status;
- anything else is a bug or a storage failure: 500, logged with its traceback.
"""
from __future__ import annotations

import logging

from aiohttp import web

from magnetar.broker.namespaces import resources
from magnetar.broker.errors import OwnedElsewhere, BrokerError, NotAllowed, ServiceNotReady, TopicNotFound
from magnetar.storage import StorageError

log = logging.getLogger(__name__)


class AdminError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def bad_request(reason: str) -> AdminError:
    return AdminError(400, reason)


def not_found(reason: str) -> AdminError:
    return AdminError(404, reason)


def conflict(reason: str) -> AdminError:
    return AdminError(409, reason)


def precondition_failed(reason: str) -> AdminError:
    return AdminError(412, reason)


_RESOURCE_STATUS = {
    resources.ResourceNotFound: 404,
    resources.AlreadyExists: 409,
    resources.NotEmpty: 409,
    resources.InvalidInput: 400,
    resources.PreconditionFailed: 412,
    resources.Forbidden: 403,
}


def status_of(exc: BaseException) -> int:
    """The HTTP status for an exception a handler let escape."""
    if isinstance(exc, AdminError):
        return exc.status
    for kind, status in _RESOURCE_STATUS.items():
        if isinstance(exc, kind):
            return status
    if isinstance(exc, TopicNotFound):
        return 404
    if isinstance(exc, ServiceNotReady):
        return 503
    if isinstance(exc, NotAllowed):
        return 405
    if isinstance(exc, BrokerError):
        return 412
    return 500


def redirect_to_owner(request: web.Request, exc: OwnedElsewhere) -> web.Response:
    """307 to the same path and query on the owner's admin URL (https if
    this request came over TLS and the owner has it), as Pulsar answers a
    topic operation sent to a broker that does not own the topic. 307 keeps
    the method and body: a client resends the PUT or POST there."""
    base = exc.web_service_url_tls if request.secure and exc.web_service_url_tls else exc.web_service_url
    if not base:
        return reason(503, str(exc))
    location = base.rstrip("/") + str(request.rel_url)
    return web.json_response({"reason": str(exc)}, status=307, headers={"Location": location})


def reason(status: int, text: str) -> web.Response:
    return web.json_response({"reason": text}, status=status)


@web.middleware
async def json_errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return reason(exc.status, exc.reason)
    except OwnedElsewhere as exc:
        return redirect_to_owner(request, exc)
    except (AdminError, resources.ResourceError, BrokerError) as exc:
        return reason(status_of(exc), str(exc))
    except StorageError as exc:
        log.warning("%s %s: storage error: %s", request.method, request.path, exc)
        return reason(500, f"storage error: {exc}")
    except Exception as exc:
        log.exception("%s %s failed", request.method, request.path)
        return reason(500, f"internal error: {type(exc).__name__}: {exc}")
