"""GET_LAST_MESSAGE_ID is asked again while the topic is between owners
(a ServiceNotReady answer, a dropped connection), until the operation
timeout, as the Java client does; other errors are raised at once."""
from __future__ import annotations

import itertools
import types

import pytest

from magnetar.client import errors
from magnetar.client.consumer import AsyncConsumer
from magnetar.protocol import Type, command, pb


def _consumer(replies: list, timeout: float = 5.0) -> AsyncConsumer:
    consumer = AsyncConsumer.__new__(AsyncConsumer)  # only what the request needs: a ready connection, ids, a timeout
    asked = []

    class _Connection:
        async def request(self, cmd, timeout):
            asked.append(cmd.getLastMessageId.request_id)
            reply = replies.pop(0)
            if isinstance(reply, Exception):
                raise reply
            return reply

    async def wait_ready():
        return _Connection()

    consumer.wait_ready = wait_ready
    consumer.consumer_id = 3
    consumer._client = types.SimpleNamespace(operation_timeout=timeout, new_request_id=itertools.count(1).__next__)
    consumer.asked = asked
    return consumer


def _answer(entry_id: int) -> pb.BaseCommand:
    return command(Type.GET_LAST_MESSAGE_ID_RESPONSE, request_id=9,
                   last_message_id=pb.MessageIdData(ledgerId=5, entryId=entry_id))


async def test_a_topic_between_owners_is_asked_again_until_it_answers():
    consumer = _consumer([errors.ServiceUnitNotReady("moving"), errors.ConnectError("dropped"), _answer(41)])
    reply = await consumer._last_message_id_reply()
    assert reply.last_message_id.entryId == 41
    assert consumer.asked == [1, 2, 3]  # a new request each time


async def test_other_errors_are_raised_at_once():
    consumer = _consumer([errors.TopicNotFound("gone"), _answer(1)])
    with pytest.raises(errors.TopicNotFound):
        await consumer._last_message_id_reply()
    assert consumer.asked == [1]


async def test_a_topic_never_ready_fails_at_the_operation_timeout():
    consumer = _consumer([errors.ServiceUnitNotReady("moving")] * 100, timeout=0.3)
    with pytest.raises(errors.ServiceUnitNotReady):
        await consumer._last_message_id_reply()
    assert 2 <= len(consumer.asked) < 100
