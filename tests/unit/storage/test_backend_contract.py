"""The LedgerBackend contract (magnetar/storage/backend.py), run over every
backend: segment files, and objects in a real SeaweedFS with their index in a
real etcd (the ``place`` fixture, backend_places.py).

Two backends on one place are two brokers sharing it: the old owner and the
new one that fences it. The crash is a real one: a child process writing
without pause, killed with SIGKILL.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from magnetar.storage import (
    BackendStats,
    CorruptLedgerError,
    LedgerBackend,
    LedgerHandle,
    ManagedLedgerFencedError,
    StorageError,
)
from magnetar.storage.framing import HEADER_SIZE

ROOT = Path(__file__).resolve().parents[3]


async def write(backend: LedgerBackend, ledger: LedgerHandle, datas: list[bytes]) -> asyncio.Future:
    """Submit ``datas``; the future gets what the callback was given (None: durable)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    backend.submit(ledger, datas, done.set_result, loop)  # a second callback would raise InvalidStateError
    return done


async def durable(backend: LedgerBackend, ledger: LedgerHandle, datas: list[bytes]) -> None:
    assert await asyncio.wait_for(await write(backend, ledger, datas), 10) is None


async def read_all(backend: LedgerBackend, ledger: LedgerHandle) -> list[bytes]:
    out: list[bytes] = []
    while len(out) < ledger.entry_count:
        got = await backend.read(ledger, len(out), ledger.entry_count - 1, None)
        assert got, "a read returns at least one entry"
        out += got
    return out


def size_of(datas: list[bytes]) -> int:
    return sum(len(d) + HEADER_SIZE for d in datas)


# --- create, submit, read -------------------------------------------------


async def test_batches_complete_in_order_and_read_back(place):
    backend = await place.open()
    ledger = await backend.create(1)
    assert (ledger.ledger_id, ledger.entry_count, ledger.size) == (1, 0, 0)
    batches = [[b"a", b"bb"], [b"ccc"], [bytes(1000)] * 3, [b"d"]]
    completed: list[int] = []
    futures = []
    for i, datas in enumerate(batches):
        futures.append(await write(backend, ledger, datas))
        futures[-1].add_done_callback(lambda _, i=i: completed.append(i))
    assert await asyncio.wait_for(asyncio.gather(*futures), 10) == [None] * 4
    assert completed == [0, 1, 2, 3]
    every = [d for datas in batches for d in datas]
    assert ledger.entry_count == len(every)
    assert ledger.size == size_of(every)  # HEADER_SIZE of framing per entry, whatever is stored
    assert await read_all(backend, ledger) == every
    assert await backend.read(ledger, 2, 3, None) == [b"ccc", bytes(1000)]


async def test_a_read_stops_past_max_bytes_yet_returns_one_entry(place):
    backend = await place.open()
    ledger = await backend.create(1)
    datas = [bytes([i]) * 100 for i in range(10)]
    await durable(backend, ledger, datas)
    got = await backend.read(ledger, 0, 9, 250)
    assert got == datas[:len(got)] and 1 <= len(got) <= 3
    assert await backend.read(ledger, 4, 9, 1) == [datas[4]]


async def test_a_write_counts_in_the_backends_stats(place):
    backend = await place.open()
    before = backend.stats()
    assert isinstance(before, BackendStats) and before.kind == place.kind
    await durable(backend, await backend.create(1), [b"x"])
    after = backend.stats()
    assert any(after.counters[name] > before.counters.get(name, 0) for name in after.counters)


async def test_a_stopped_backend_refuses_a_submit_at_once(place):
    backend = await place.open()
    ledger = await backend.create(1)
    await durable(backend, ledger, [b"x"])
    await backend.close()
    with pytest.raises(StorageError):
        backend.submit(ledger, [b"y"], lambda error: None, asyncio.get_running_loop())


async def test_submit_many_writes_several_ledgers_in_one_call(place):
    """One loop pass's hand-over (flush_pass.py): each ledger's batch is
    durable, in its own ledger, after one call for them all."""
    backend = await place.open()
    loop = asyncio.get_running_loop()
    ledgers = [await backend.create(i) for i in range(1, 6)]
    datas = {ledger.ledger_id: [f"{ledger.ledger_id}-{j}".encode() for j in range(ledger.ledger_id)]
             for ledger in ledgers}
    told = {ledger.ledger_id: loop.create_future() for ledger in ledgers}
    backend.submit_many([(ledger, datas[ledger.ledger_id], size_of(datas[ledger.ledger_id]),
                          told[ledger.ledger_id].set_result) for ledger in ledgers], loop)
    assert await asyncio.wait_for(asyncio.gather(*told.values()), 10) == [None] * 5
    for ledger in ledgers:
        assert await read_all(backend, ledger) == datas[ledger.ledger_id]
    await backend.close()
    with pytest.raises(StorageError):
        backend.submit_many([(ledgers[0], [b"y"], size_of([b"y"]), lambda error: None)], loop)


# --- seal, open sealed ----------------------------------------------------


async def test_seal_waits_for_every_batch_and_another_backend_reads_the_sealed_ledger(place):
    backend = await place.open()
    ledger = await backend.create(1)
    batches = [[f"{i}-{j}".encode() for j in range(5)] for i in range(4)]
    futures = [await write(backend, ledger, datas) for datas in batches]
    every = [d for datas in batches for d in datas]
    assert await asyncio.wait_for(backend.seal(ledger), 10) == (len(every), size_of(every))
    assert all(f.done() and f.result() is None for f in futures)  # seal came after them all

    reader = await place.open()  # another broker, after a move
    sealed = await reader.open_sealed(1, len(every))
    assert sealed.entry_count == len(every)
    assert await read_all(reader, sealed) == every
    with pytest.raises(CorruptLedgerError):
        await reader.open_sealed(1, len(every) + 1)  # metadata says more than is stored


# --- fence, recover: the zombie gets no receipt ----------------------------


async def test_a_new_owner_recovers_every_acknowledged_entry_and_the_zombie_gets_no_receipt(place):
    old = await place.open()
    ledger = await old.create(1)
    acked = [f"a{i}".encode() for i in range(6)]
    await durable(old, ledger, acked[:3])
    await durable(old, ledger, acked[3:])

    new = await place.open()
    assert not await old.taken_over(1)
    await new.fence(1)
    assert await old.taken_over(1)
    recovered = await new.recover(1)
    assert recovered.entry_count == len(acked)
    assert await read_all(new, recovered) == acked

    # The old owner missed the takeover and writes on: no receipt, ever.
    error = await asyncio.wait_for(await write(old, ledger, [b"zombie"]), 10)
    assert isinstance(error, ManagedLedgerFencedError), error
    error = await asyncio.wait_for(await write(old, ledger, [b"again"]), 10)
    assert isinstance(error, StorageError), error
    again = await (await place.open()).open_sealed(1, recovered.entry_count)
    assert await read_all(new, again) == acked


async def test_batches_in_flight_at_the_fence_are_acknowledged_only_if_recovered(place):
    old = await place.open()
    ledger = await old.create(1)
    await durable(old, ledger, [b"first"])
    new = await place.open()
    futures = [await write(old, ledger, [f"{i}".encode()]) for i in range(30)]
    await new.fence(1)
    recovered = await new.recover(1)
    results = await asyncio.wait_for(asyncio.gather(*futures), 10)
    stored = await read_all(new, recovered)
    for i, error in enumerate(results):
        if error is None:
            assert stored[1 + i] == f"{i}".encode()  # acknowledged: the new owner has it
        else:
            assert isinstance(error, StorageError), error
            assert all(later is not None for later in results[i:])  # nothing after a refusal
    after = await asyncio.wait_for(await write(old, ledger, [b"late"]), 10)
    assert isinstance(after, ManagedLedgerFencedError), after


async def test_an_empty_ledger_recovers_empty_and_a_missing_one_as_none(place):
    old = await place.open()
    await old.create(5)
    new = await place.open()
    await new.fence(5)
    recovered = await new.recover(5)
    assert recovered is None or recovered.entry_count == 0
    await new.fence(99)  # never created: nothing to fence, no error
    assert await new.recover(99) is None


async def test_a_fenced_empty_ledger_deleted_still_refuses_its_old_writer(place):
    """The new owner drops an empty ledger it fenced (``delete(fenced=True)``):
    the old owner, paused with it open, must still get no receipt."""
    old = await place.open()
    ledger = await old.create(3)
    new = await place.open()
    await new.fence(3)
    recovered = await new.recover(3)
    await new.delete(3, recovered, fenced=True)
    error = await asyncio.wait_for(await write(old, ledger, [b"zombie"]), 10)
    assert isinstance(error, ManagedLedgerFencedError), error


# --- delete ---------------------------------------------------------------


async def test_delete_removes_the_ledger_and_a_missing_one_is_fine(place):
    backend = await place.open()
    ledger = await backend.create(1)
    await durable(backend, ledger, [b"x", b"y"])
    await backend.seal(ledger)
    keep = await backend.create(2)
    await durable(backend, keep, [b"kept"])
    assert {1, 2} <= await backend.stored_ledger_ids()
    await backend.delete(1)
    assert 1 not in await backend.stored_ledger_ids() and 2 in await backend.stored_ledger_ids()
    with pytest.raises(StorageError):
        await (await place.open()).open_sealed(1, 2)
    await backend.delete(1)  # again: nothing there, no error
    await backend.delete(404)
    assert await read_all(backend, keep) == [b"kept"]


# --- a crash mid-commit ---------------------------------------------------


async def test_a_writer_killed_mid_commit_loses_no_acknowledged_entry(place):
    """SIGKILL while batches are being written and committed: a new owner's
    recovery holds every entry the writer acknowledged, as a prefix of what
    it submitted, every entry intact (a torn tail is cut, not read)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child = subprocess.Popen([sys.executable, "-m", "tests.unit.storage.backend_places", json.dumps(place.spec), "7"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked_end = 0
    try:
        deadline = time.monotonic() + 30
        assert (await asyncio.to_thread(child.stdout.readline)).strip() == "created", child.stderr.read()
        while acked_end < 300:  # well into the stream: commits under way when the kill lands
            line = await asyncio.to_thread(child.stdout.readline)
            assert line, f"the writer ended: {child.stderr.read()[-2000:]}"
            _, first, count = line.split()
            acked_end = max(acked_end, int(first) + int(count))
            assert time.monotonic() < deadline, "too few receipts"
    finally:
        child.send_signal(signal.SIGKILL)
        rest, _ = await asyncio.to_thread(child.communicate)
    for line in rest.splitlines():  # receipts printed before the kill
        fields = line.split()
        if len(fields) != 3 or fields[0] != "acked":
            continue  # the kill cut the print short: not a receipt the test can read
        acked_end = max(acked_end, int(fields[1]) + int(fields[2]))

    new = await place.open()
    await new.fence(7)
    recovered = await new.recover(7)
    assert recovered.entry_count >= acked_end
    assert await read_all(new, recovered) == [str(i).encode() * 50 for i in range(recovered.entry_count)]
