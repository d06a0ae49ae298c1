"""A loaded topic whose managed ledger another broker opened since: the next
get_topic loads it again rather than serve the stale instance.

Regression (chaos run seed 27, an etcd partition): a broker back from a lost
session took the bundle for a moment with a stale view, opened the topic
(fencing the owner's ledger), stored two acknowledged messages and let go;
the owner kept its fenced instance, refused every producer for seconds, and
answered the final read without the two messages."""
from __future__ import annotations

import asyncio
import time

import pytest

from magnetar.broker.errors import ServiceNotReady
from magnetar.broker.topic_name import parse
from magnetar.broker.topics.topic import Topic
from magnetar.metadata import MemoryMetadataStore
from magnetar.protocol import pb

from .harness import close_service, make_service

_META = pb.MessageMetadata(producer_name="marker", sequence_id=0, publish_time=1).SerializeToString()


async def test_a_topic_opened_elsewhere_is_loaded_again_with_what_the_other_stored(tmp_path):
    store = MemoryMetadataStore()
    owner = await make_service(tmp_path, store)
    interloper = await make_service(tmp_path, store)
    name = parse("persistent://public/default/opened-elsewhere")
    try:
        stale = await owner.get_topic(name)
        await stale.append_marker(_META, b"first")
        taken = await interloper.get_topic(name)  # recovers and fences the owner's ledger
        await taken.append_marker(_META, b"second")
        await interloper.unload(taken)
        deadline = time.monotonic() + 10  # the owner hears of it through its metadata watch
        while stale.ledger.state != "fenced":
            assert time.monotonic() < deadline, "the owner never noticed the takeover"
            await asyncio.sleep(0.02)
        fresh = await owner.get_topic(name)
        assert fresh is not stale and fresh.ledger.state == "open"
        assert fresh.ledger.entry_count == 2  # the interloper's entry too
        await fresh.append_marker(_META, b"third")
    finally:
        await close_service(interloper)
        await close_service(owner)


async def test_a_load_that_outlives_its_ledger_instance_is_not_served(tmp_path, monkeypatch):
    """A load begun on an instance that another broker fences before the
    load ends must not be served: the instance's view predates that broker's
    entries, and its fence was announced before the topic listened.

    Regression (object-storage soak of 2026-11-27): a load slowed by a
    flapping object store finished 18 s later, after the bundle had been
    elsewhere and come back, and answered a next offset 85 below receipts
    already given."""
    store = MemoryMetadataStore()
    owner = await make_service(tmp_path, store)
    interloper = await make_service(tmp_path, store)
    name = parse("persistent://public/default/outlived")
    real_load = Topic.load.__func__
    gate, entered, instances = asyncio.Event(), asyncio.Event(), []

    async def paused_load(cls, service, topic_name, ledger, moving=None, **kwargs):
        if service is owner and not gate.is_set():
            instances.append(ledger)
            entered.set()
            await gate.wait()
        return await real_load(cls, service, topic_name, ledger, moving, **kwargs)

    monkeypatch.setattr(Topic, "load", classmethod(paused_load))
    try:
        loading = asyncio.get_running_loop().create_task(owner.get_topic(name))
        await entered.wait()
        taken = await interloper.get_topic(name)  # opens the managed ledger: the owner's instance is fenced
        await taken.append_marker(_META, b"elsewhere")
        await interloper.unload(taken)
        deadline = time.monotonic() + 10
        while instances[0].state != "fenced":
            assert time.monotonic() < deadline, "the owner never noticed the takeover"
            await asyncio.sleep(0.02)
        gate.set()
        with pytest.raises(ServiceNotReady):
            await loading
        fresh = await owner.get_topic(name)
        assert fresh.ledger is not instances[0] and fresh.ledger.state == "open"
        assert fresh.ledger.entry_count == 1  # the interloper's entry
    finally:
        await close_service(interloper)
        await close_service(owner)
