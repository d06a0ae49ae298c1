"""GET_NEXT_OFFSET, FETCH_ENTRIES and the schema requests answer even when loading fails
underneath: a storage or metadata failure (the object store or etcd out of
reach, the ledger fenced by a new owner mid-load) is a ServiceNotReady
answer, which the client retries, not a handler task dying with the error
unread and the client waiting out its operation timeout.

Found by the object storage soak (docs/reliability.md): brokers logged
"Task exception was never retrieved" for on_get_next_offset after a
kill-objectstore (a dedup replay's ranged GET refused) and after a move
(the ledger's metadata written by the new owner first)."""
from __future__ import annotations

import pytest

from magnetar.broker.server.handlers.consume import on_get_last_message_id
from magnetar.broker.server.handlers.fetch import on_fetch_entries
from magnetar.broker.server.handlers.produce import on_get_next_offset
from magnetar.broker.server.handlers.schema import on_get_or_create_schema, on_get_schema
from magnetar.metadata.store import BadVersion
from magnetar.protocol import ServerError, pb
from magnetar.storage import StorageError
from magnetar.storage.errors import ManagedLedgerClosedError, ManagedLedgerFencedError

TOPIC = "persistent://public/default/always-answer"
FAILURES = [
    StorageError("reading ledger 201 from data/x/1-00000811 failed: connection refused"),
    ManagedLedgerFencedError("managed ledger 'public/default/persistent/t' was changed elsewhere"),
    BadVersion("/managed-ledgers/public/default/persistent/t is at version 33, not 32"),
    OSError(28, "No space left on device"),
]


class _FailingLoads:
    """The broker service and schema registry of a broker whose storage fails."""

    authorizer = store = None

    def __init__(self, failure: Exception) -> None:
        self.failure = failure
        self.schemas = self

    async def check_served_here(self, name) -> None:
        pass

    async def get_topic(self, name, create=None):
        raise self.failure

    async def get_schema_response(self, req, name):
        raise self.failure

    async def get_or_create_response(self, req, name):
        raise self.failure


class _Session:
    """What the handlers use of a connection: the service, and write()."""

    role = None

    def __init__(self, failure: Exception) -> None:
        self.service = _FailingLoads(failure)
        self.written: list[pb.BaseCommand] = []

    def write(self, cmd: pb.BaseCommand) -> None:
        self.written.append(cmd)


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
async def test_next_offset_answers_service_not_ready_when_the_topic_cannot_load(failure):
    session = _Session(failure)
    await on_get_next_offset(session, pb.CommandGetNextOffset(request_id=7, topic=TOPIC))
    [answer] = session.written
    reply = answer.getNextOffsetResponse
    assert (reply.request_id, reply.error) == (7, ServerError.ServiceNotReady)
    assert str(failure) in reply.message


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
async def test_schema_requests_answer_service_not_ready_when_the_store_fails(failure):
    session = _Session(failure)
    await on_get_schema(session, pb.CommandGetSchema(request_id=8, topic=TOPIC))
    await on_get_or_create_schema(session, pb.CommandGetOrCreateSchema(
        request_id=9, topic=TOPIC, schema=pb.Schema(name="s", schema_data=b"", type=pb.Schema.String)))
    got, created = session.written
    assert (got.getSchemaResponse.request_id, got.getSchemaResponse.error_code) == (8, ServerError.ServiceNotReady)
    assert (created.getOrCreateSchemaResponse.request_id,
            created.getOrCreateSchemaResponse.error_code) == (9, ServerError.ServiceNotReady)


@pytest.mark.parametrize("failure", FAILURES, ids=lambda e: type(e).__name__)
async def test_fetch_answers_service_not_ready_when_the_topic_cannot_load(failure):
    session = _Session(failure)
    await on_fetch_entries(session, pb.CommandFetchEntries(request_id=10, topic=TOPIC, start_offset=0))
    [answer] = session.written
    reply = answer.fetchEntriesResponse
    assert (reply.request_id, reply.error) == (10, ServerError.ServiceNotReady)
    assert str(failure) in reply.message


class _ClosingTopic:
    """A topic whose managed ledger closed under the request (it is moving)."""

    name = TOPIC

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    async def last_message_id(self):
        raise self.failure


class _Subscription:
    cursor = object()

    def __init__(self, failure: Exception) -> None:
        self.topic = _ClosingTopic(failure)


class _Consumer:
    read_compacted = False
    partition = -1

    def __init__(self, failure: Exception) -> None:
        self.subscription = _Subscription(failure)


@pytest.mark.parametrize("failure", FAILURES + [ManagedLedgerClosedError("managed ledger 't' is closed")],
                         ids=lambda e: type(e).__name__)
async def test_last_message_id_answers_service_not_ready_when_the_topic_closes_under_it(failure):
    # Seen in `make chaos` (cluster, seed 2): a reader's GET_LAST_MESSAGE_ID
    # reached a broker releasing the topic for a move; the handler died with
    # ManagedLedgerClosedError unread and the reader waited 30 s for nothing.
    session = _Session(failure)
    await on_get_last_message_id(session, pb.CommandGetLastMessageId(request_id=11, consumer_id=1),
                                 _Consumer(failure))
    [answer] = session.written
    reply = answer.error
    assert (reply.request_id, reply.error) == (11, ServerError.ServiceNotReady)
    assert str(failure) in reply.message
