"""The client's exceptions, named after the official ``pulsar`` package's.

Every exception is a :class:`PulsarError`. ``.code`` is the wire ServerError
code when the broker reported the error (None for client-side failures such
as timeouts or lost connections); ``.result`` is the matching :class:`Result`,
the value a ``send_async`` callback receives.
"""
from __future__ import annotations

import enum

from magnetar.protocol import ServerError


class Result(enum.IntEnum):
    """Outcome codes, numbered like the official client's ``pulsar.Result``."""

    Ok = 0
    UnknownError = 1
    InvalidConfiguration = 2
    Timeout = 3
    LookupError = 4
    ConnectError = 5
    ReadError = 6
    AuthenticationError = 7
    AuthorizationError = 8
    BrokerMetadataError = 10
    BrokerPersistenceError = 11
    ChecksumError = 12
    ConsumerBusy = 13
    NotConnected = 14
    AlreadyClosed = 15
    InvalidMessage = 16
    ProducerBusy = 19
    TooManyLookupRequestException = 20
    InvalidTopicName = 21
    InvalidUrl = 22
    ServiceUnitNotReady = 23
    OperationNotSupported = 24
    ProducerBlockedQuotaExceededError = 25
    ProducerBlockedQuotaExceededException = 26
    ProducerQueueIsFull = 27
    MessageTooBig = 28
    TopicNotFound = 29
    SubscriptionNotFound = 30
    ConsumerNotFound = 31
    UnsupportedVersionError = 32
    TopicTerminated = 33
    IncompatibleSchema = 35
    ConsumerAssignError = 36
    CumulativeAcknowledgementNotAllowedError = 37
    NotAllowedError = 40
    ProducerFenced = 43
    # Magnetar's own outcomes, far from the official numbering.
    OutOfOrderSequence = 1000
    ExpectedOffsetMismatch = 1001


class PulsarError(Exception):
    """Base of every client error. ``code``: the broker's ServerError, if any."""

    result: Result = Result.UnknownError

    def __init__(self, message: str = "", code: int | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        self.code = code


#: The official package's name for the base class.
PulsarException = PulsarError


def _kind(name: str, result: Result, doc: str) -> type[PulsarError]:
    return type(name, (PulsarError,), {"result": result, "__doc__": doc})


UnknownError = _kind("UnknownError", Result.UnknownError, "The broker reported an unclassified error.")
InvalidConfiguration = _kind("InvalidConfiguration", Result.InvalidConfiguration, "A bad argument.")
Timeout = _kind("Timeout", Result.Timeout, "An operation did not finish in time.")
LookupError = _kind("LookupError", Result.LookupError, "Topic lookup failed.")  # noqa: A001
ConnectError = _kind("ConnectError", Result.ConnectError, "Cannot reach the broker, or the connection dropped.")
AuthenticationError = _kind("AuthenticationError", Result.AuthenticationError, "Authentication failed.")
AuthorizationError = _kind("AuthorizationError", Result.AuthorizationError, "Not authorized.")
BrokerMetadataError = _kind("BrokerMetadataError", Result.BrokerMetadataError, "Broker metadata error.")
BrokerPersistenceError = _kind("BrokerPersistenceError", Result.BrokerPersistenceError, "Broker storage error.")
ChecksumError = _kind("ChecksumError", Result.ChecksumError, "A payload checksum did not match.")
ConsumerBusy = _kind("ConsumerBusy", Result.ConsumerBusy, "The subscription cannot take another consumer.")
NotConnected = _kind("NotConnected", Result.NotConnected, "No connection to the broker right now.")
AlreadyClosed = _kind("AlreadyClosed", Result.AlreadyClosed, "The client, producer or consumer is closed.")
InvalidMessage = _kind("InvalidMessage", Result.InvalidMessage, "A message could not be decoded.")
ProducerBusy = _kind("ProducerBusy", Result.ProducerBusy, "The topic's access mode refuses this producer.")
InvalidTopicName = _kind("InvalidTopicName", Result.InvalidTopicName, "The topic name is not valid.")
InvalidUrl = _kind("InvalidUrl", Result.InvalidUrl, "The service URL is not valid.")
ServiceUnitNotReady = _kind("ServiceUnitNotReady", Result.ServiceUnitNotReady, "The broker is not ready for the topic.")
OperationNotSupported = _kind("OperationNotSupported", Result.OperationNotSupported, "Not supported.")
ProducerBlockedQuotaExceededError = _kind(
    "ProducerBlockedQuotaExceededError", Result.ProducerBlockedQuotaExceededError, "Backlog quota exceeded."
)
ProducerBlockedQuotaExceededException = _kind(
    "ProducerBlockedQuotaExceededException", Result.ProducerBlockedQuotaExceededException, "Backlog quota exceeded."
)
ProducerQueueIsFull = _kind("ProducerQueueIsFull", Result.ProducerQueueIsFull, "max_pending_messages reached.")
MessageTooBig = _kind("MessageTooBig", Result.MessageTooBig, "The message exceeds the broker's max size.")
TopicNotFound = _kind("TopicNotFound", Result.TopicNotFound, "The topic does not exist.")
SubscriptionNotFound = _kind("SubscriptionNotFound", Result.SubscriptionNotFound, "No such subscription.")
ConsumerNotFound = _kind("ConsumerNotFound", Result.ConsumerNotFound, "No such consumer.")
UnsupportedVersionError = _kind("UnsupportedVersionError", Result.UnsupportedVersionError, "Protocol version refused.")
TopicTerminated = _kind("TopicTerminated", Result.TopicTerminated, "The topic is terminated.")
IncompatibleSchema = _kind("IncompatibleSchema", Result.IncompatibleSchema, "Schema incompatible.")
ConsumerAssignError = _kind("ConsumerAssignError", Result.ConsumerAssignError, "Consumer assignment failed.")
CumulativeAcknowledgementNotAllowedError = _kind(
    "CumulativeAcknowledgementNotAllowedError",
    Result.CumulativeAcknowledgementNotAllowedError,
    "Cumulative acks are not allowed on Shared and Key_Shared subscriptions.",
)
NotAllowedError = _kind("NotAllowedError", Result.NotAllowedError, "The broker does not allow the operation.")
ProducerFenced = _kind("ProducerFenced", Result.ProducerFenced, "A newer exclusive producer took over the topic.")
OutOfOrderSequence = _kind("OutOfOrderSequence", Result.OutOfOrderSequence, "Idempotent sequence gap.")


class ExpectedOffsetMismatch(PulsarError):
    """A conditional publish found the topic at another offset.

    ``next_offset`` is the topic's actual upcoming offset as the broker
    reported it (None if it did not say).
    """

    result = Result.ExpectedOffsetMismatch

    def __init__(self, message: str = "", code: int | None = None, next_offset: int | None = None) -> None:
        super().__init__(message, code)
        self.next_offset = next_offset


_BY_SERVER_ERROR: dict[int, type[PulsarError]] = {
    ServerError.UnknownError: UnknownError,
    ServerError.MetadataError: BrokerMetadataError,
    ServerError.PersistenceError: BrokerPersistenceError,
    ServerError.AuthenticationError: AuthenticationError,
    ServerError.AuthorizationError: AuthorizationError,
    ServerError.ConsumerBusy: ConsumerBusy,
    ServerError.ServiceNotReady: ServiceUnitNotReady,
    ServerError.ProducerBlockedQuotaExceededError: ProducerBlockedQuotaExceededError,
    ServerError.ProducerBlockedQuotaExceededException: ProducerBlockedQuotaExceededException,
    ServerError.ChecksumError: ChecksumError,
    ServerError.UnsupportedVersionError: UnsupportedVersionError,
    ServerError.TopicNotFound: TopicNotFound,
    ServerError.SubscriptionNotFound: SubscriptionNotFound,
    ServerError.ConsumerNotFound: ConsumerNotFound,
    ServerError.TooManyRequests: ServiceUnitNotReady,
    ServerError.TopicTerminatedError: TopicTerminated,
    ServerError.ProducerBusy: ProducerBusy,
    ServerError.InvalidTopicName: InvalidTopicName,
    ServerError.IncompatibleSchema: IncompatibleSchema,
    ServerError.ConsumerAssignError: ConsumerAssignError,
    ServerError.NotAllowedError: NotAllowedError,
    ServerError.ProducerFenced: ProducerFenced,
    ServerError.OutOfOrderSequence: OutOfOrderSequence,
    ServerError.ExpectedOffsetMismatch: ExpectedOffsetMismatch,
}


def from_server_error(code: int, message: str = "") -> PulsarError:
    """The exception for a broker's ServerError ``code`` (UnknownError if unmapped)."""
    return _BY_SERVER_ERROR.get(code, UnknownError)(message, code)


#: Creation errors no retry can fix: the create call fails at once.
_FATAL_ON_CREATE = (
    TopicNotFound, TopicTerminated, ProducerBusy, ConsumerBusy, NotAllowedError, IncompatibleSchema,
    AuthenticationError, AuthorizationError, ProducerBlockedQuotaExceededError,
    ProducerBlockedQuotaExceededException, ProducerFenced, InvalidTopicName, SubscriptionNotFound,
    UnsupportedVersionError, InvalidConfiguration, AlreadyClosed, OperationNotSupported,
)

#: Errors that end a producer/consumer that was already working; anything
#: else met while reconnecting (busy: the broker has not yet noticed the old
#: connection died) is retried.
_FATAL_ON_RECONNECT = (
    ProducerFenced, TopicTerminated, TopicNotFound, NotAllowedError, AuthenticationError,
    AuthorizationError, AlreadyClosed, IncompatibleSchema,
)


def is_fatal(exc: BaseException, *, reconnecting: bool) -> bool:
    """Whether registering a producer/consumer should give up after ``exc``."""
    if not isinstance(exc, PulsarError):
        return True
    return isinstance(exc, _FATAL_ON_RECONNECT if reconnecting else _FATAL_ON_CREATE)


__all__ = sorted(
    [name for name, value in list(globals().items())
     if isinstance(value, type) and issubclass(value, PulsarError)]
    + ["PulsarException", "Result", "from_server_error"]
)
