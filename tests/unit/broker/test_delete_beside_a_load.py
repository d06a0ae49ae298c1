"""Deleting a topic while its clients come back for it.

A delete unloads the topic first, which disconnects its producers and
consumers; they reconnect at once (a replicator from another region does so
within milliseconds) and their get_topic would open the managed ledger again
in the middle of the delete. Regression (CI, a forced delete of a replicated
topic): the delete then found the ledger's metadata changed under it and
answered 500, or the reload raced on with a ledger the delete was removing."""
from __future__ import annotations

import asyncio

from magnetar.broker.topic_name import parse
from magnetar.protocol import pb

from .harness import close_service, make_service

_META = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1).SerializeToString()


async def test_a_load_that_arrives_during_a_delete_waits_and_gets_a_new_topic(tmp_path):
    service = await make_service(tmp_path)
    name = parse("persistent://public/default/deleted-under-load")
    try:
        old = await service.get_topic(name, create=True)
        await old.append_marker(_META, b"before")
        assert old.next_offset == 1
        deleting = asyncio.create_task(service.delete_topic(name))
        await asyncio.sleep(0)  # the delete has begun: the topic is closing
        reloaded = await service.get_topic(name, create=True)
        await deleting  # no "changed while deleting it"
        assert reloaded is not old and not reloaded.closed
        assert reloaded.next_offset == 0, "a topic created after the delete starts empty"
        assert service.topics[str(name)] is reloaded
        await reloaded.append_marker(_META, b"after")  # and its ledger is there to write to
        assert await service.factory.exists(name.managed_ledger_name)
    finally:
        await close_service(service)


async def test_a_delete_that_arrives_during_a_load_deletes_what_was_loaded(tmp_path):
    service = await make_service(tmp_path)
    name = parse("persistent://public/default/loaded-then-deleted")
    try:
        await (await service.get_topic(name, create=True)).append_marker(_META, b"before")
        await service.unload(service.topics[str(name)])
        loading = asyncio.create_task(service.get_topic(name, create=True))
        await asyncio.sleep(0)  # the load has begun
        await service.delete_topic(name)
        loaded = await loading
        assert loaded.closed, "the topic the load made was deleted with its ledger"
        assert str(name) not in service.topics
        assert not await service.factory.exists(name.managed_ledger_name)
    finally:
        await close_service(service)
