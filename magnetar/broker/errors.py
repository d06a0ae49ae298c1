"""Refusals the broker answers with a ServerError code and a message."""
from __future__ import annotations

from magnetar.protocol import ServerError


class BrokerError(Exception):
    """A request is refused; ``code`` is the ServerError sent to the client."""

    code: int = ServerError.UnknownError

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class TopicNotFound(BrokerError):
    code = ServerError.TopicNotFound


class InvalidTopic(BrokerError):
    code = ServerError.InvalidTopicName


class ServiceNotReady(BrokerError):
    code = ServerError.ServiceNotReady


class OwnedElsewhere(ServiceNotReady):
    """Another live broker owns the topic: clients look it up again (binary
    protocol), the admin API redirects to ``web_service_url`` (307)."""

    def __init__(self, message: str, web_service_url: str, web_service_url_tls: str = "") -> None:
        super().__init__(message)
        self.web_service_url = web_service_url
        self.web_service_url_tls = web_service_url_tls


class ProducerBusy(BrokerError):
    code = ServerError.ProducerBusy


class ProducerFenced(BrokerError):
    code = ServerError.ProducerFenced


class AuthorizationError(BrokerError):
    """The connection's role may not do this (security.authorization)."""

    code = ServerError.AuthorizationError


class ConsumerBusy(BrokerError):
    code = ServerError.ConsumerBusy


class NotAllowed(BrokerError):
    code = ServerError.NotAllowedError


class NotServedHere(BrokerError):
    """The topic's namespace is not replicated to this cluster (a region not
    in its ``replication_clusters``): Pulsar refuses to serve it there. Not
    retryable: the client is pointed at the wrong cluster."""

    code = ServerError.NotAllowedError


class PersistenceError(BrokerError):
    code = ServerError.PersistenceError


class ExpectedOffsetMismatch(BrokerError):
    code = ServerError.ExpectedOffsetMismatch

    def __init__(self, message: str, next_offset: int, offset_epoch: int = 0) -> None:
        super().__init__(message)
        self.next_offset = next_offset
        self.offset_epoch = offset_epoch


class OutOfOrderSequence(BrokerError):
    code = ServerError.OutOfOrderSequence


class TopicTerminated(BrokerError):
    """The topic was terminated (admin ``terminate``): nothing more is published."""

    code = ServerError.TopicTerminatedError


class BacklogQuotaHold(BrokerError):
    """The topic is over a backlog quota whose policy is ``producer_request_hold``:
    no producer is admitted until consumers catch up. Clients retry (Pulsar's
    ProducerBlockedQuotaExceededError)."""

    code = ServerError.ProducerBlockedQuotaExceededError


class BacklogQuotaRefusal(BrokerError):
    """The topic is over a backlog quota whose policy is ``producer_exception``:
    producers and their sends are refused, and clients fail them (Pulsar's
    ProducerBlockedQuotaExceededException)."""

    code = ServerError.ProducerBlockedQuotaExceededException
