"""What the append path puts in flight stays out of the cyclic collector's
sight as far as it can.

At 10,000 written topics about 10,000 batches are in flight at once and
each ledger hands over a batch every half second or so: objects made per
hand-over that lived that long reached the collector's middle generation,
and each of its passes walked them (docs/object-storage.md, "The commit
side's objects out of the collector's sight"). A hand-over keeps the
ledger's two buffers (copied into tuples), its entries' tuple is untracked,
and the batch is its own callback (no partial, bound method, arguments and
keywords per batch)."""
from __future__ import annotations

import asyncio
import gc

from magnetar.protocol.compiled import hot
from magnetar.storage.append_batch import AppendBatch


def _record_hand_overs(factory) -> list[tuple]:
    """The writes the factory's append paths hand to its backend, recorded
    as they pass (the backend still gets every one)."""
    handed: list[tuple] = []
    submit_many = factory.backend.submit_many

    def keeping(writes, loop):
        handed.extend(writes)
        submit_many(writes, loop)

    factory.backend.submit_many = keeping
    return handed


async def test_a_hand_over_keeps_its_buffers_and_sends_untracked_entries(factories):
    assert hot is not None  # the suite runs on a built install (make install)
    factory = factories()
    ml = await factory.open("t")
    path = ml._appends
    buffers = (path._buf, path._buf_futures)
    handed = _record_hand_overs(factory)
    for round_ in range(3):
        positions = await asyncio.wait_for(asyncio.gather(*(ml.append(b"e%d" % i) for i in range(2))), 30)
        assert [p.entry_id for p in positions] == [2 * round_, 2 * round_ + 1]
    assert len(handed) == 3
    for _, datas, _, callback in handed:
        assert datas in ((b"e0", b"e1"),) and not gc.is_tracked(datas)
        assert type(callback) is AppendBatch  # the batch itself, not a functools.partial around it
    assert (path._buf, path._buf_futures) == buffers and all(
        now is before for now, before in zip((path._buf, path._buf_futures), buffers))
    assert [e.data for e in await ml.read_entries(positions[0].__class__(positions[0].ledger_id, 0), 6)] == [
        b"e0", b"e1"] * 3


async def test_a_failed_batch_still_fails_its_appends_through_the_batch_callback(factories):
    factory = factories()
    ml = await factory.open("t")
    first = ml.append(b"a")
    await asyncio.wait_for(first, 30)
    path = ml._appends
    taken = None
    real = factory.backend.submit_many

    def refusing(writes, loop):
        nonlocal taken
        taken = writes
        for _, _, _, callback in writes:
            callback(RuntimeError("disk on fire"))

    factory.backend.submit_many = refusing
    doomed = ml.append(b"b")
    try:
        await asyncio.wait_for(doomed, 30)
    except Exception as exc:  # StorageError wrapping the backend's error
        assert "disk on fire" in str(exc)
    else:
        raise AssertionError("the append was acknowledged after its batch failed")
    factory.backend.submit_many = real
    assert taken is not None and not path._inflight


async def test_a_run_of_one_callback_is_kept_as_the_callback_and_a_count(factories):
    factory = factories()
    ml = await factory.open("t")
    handed = _record_hand_overs(factory)
    told: list[tuple] = []
    done = asyncio.Event()

    def on_stored(ledger_id, first, count, error):
        told.append((first, count, error))
        done.set()

    for i in range(3):
        ml.append_then(b"r%d" % i, on_stored)
    await asyncio.wait_for(done.wait(), 30)
    (_, datas, _, batch), = handed
    assert datas == (b"r0", b"r1", b"r2")
    assert batch.waiter is on_stored and batch._futures is None and batch.count == 3  # no tuple of waiters
    assert batch.futures == (on_stored,) * 3
    assert told == [(0, 3, None)]  # the run told once


async def test_a_stored_batch_leaves_no_tracked_tuple_on_the_path(factories):
    factory = factories()
    ml = await factory.open("t")
    gc.collect()  # the young collection would untrack an exact tuple of ints by itself
    positions = await asyncio.wait_for(asyncio.gather(*(ml.append(b"x") for _ in range(3))), 30)
    path = ml._appends
    assert not [name for name, value in vars(path).items() if type(value) is tuple and gc.is_tracked(value)]
    assert ml.last_confirmed == positions[-1]


async def test_managed_ledgers_share_their_factory_s_hooks(factories):
    factory = factories()
    one, two = await factory.open("a"), await factory.open("b")
    # One bound method for all of them, not one each (an object per loaded topic for the collector).
    assert one._appends._roller._new_ledger_id is two._appends._roller._new_ledger_id


def test_a_ledger_s_cached_run_is_one_object():
    from magnetar.storage.cache import TailCache

    cache = TailCache(1 << 20)
    cache.put_many(3, 0, [b"a", b"b"])
    cache.put_many(3, 2, (b"c",))
    (run,) = cache._runs.values()
    assert run == [b"a", b"b", b"c"] and run.first == 0 and run.end() == 3
    assert not [x for x in gc.get_referents(run) if gc.is_tracked(x) and not isinstance(x, type)]  # no list beside it
    assert cache.get(3, 1, 2) == [b"b", b"c"]


async def test_a_ledger_nobody_follows_has_no_listener_objects(factories):
    factory = factories()
    ml = await factory.open("t")
    await asyncio.wait_for(ml.append(b"x"), 30)
    listeners = ml._listeners
    assert listeners._callbacks is None and listeners._ids is None and len(listeners) == 0
    woken = asyncio.Event()
    remove = listeners.add(woken.set)
    await asyncio.wait_for(ml.append(b"y"), 30)
    await asyncio.wait_for(woken.wait(), 30)
    remove()
    assert len(listeners) == 0
