"""Conditional publish (expected offsets) with our client against a real broker,
and the kvstore example that builds on it, run as processes."""
from __future__ import annotations

import asyncio
import json
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from magnetar.client import AsyncClient, Client, errors
from magnetar.protocol.commands import Type

from magnetar_harness.broker import configured_broker
from tests.helpers import unique
from .cutting_proxy import CuttingProxy
from .topic_log import read_topic_ours

KVSTORE = Path(__file__).resolve().parents[2] / "examples" / "kvstore" / "kvstore.py"


async def read_all(url: str, topic: str) -> list:
    return await read_topic_ours(url, topic, queue_size=2000)


async def settle(futures) -> list:
    """Each future's result or exception, in order."""
    return list(await asyncio.gather(*futures, return_exceptions=True))


async def test_mismatch_refuses_the_whole_batch(broker):
    topic = unique("batch")
    client = AsyncClient(broker.service_url, operation_timeout_seconds=15)
    producer = await client.create_producer(topic, batching_enabled=True, batching_max_messages=100,
                                            batching_max_publish_delay_ms=50)
    assert (await producer.send(b"first")).offset == 0
    refused = await settle([producer.send_nowait(b"r%d" % i, expected_offset=5 + i) for i in range(50)]
                           + [producer.flush()])
    refused.pop()  # flush()
    assert all(isinstance(r, errors.ExpectedOffsetMismatch) for r in refused), refused[:3]
    assert {r.next_offset for r in refused} == {1}
    assert await client.get_next_offset(topic) == 1  # nothing of the batch was appended
    stored = await settle([producer.send_nowait(b"s%d" % i, expected_offset=1 + i) for i in range(50)])
    assert [mid.offset for mid in stored] == list(range(1, 51))
    assert len({mid.entry_key for mid in stored}) == 1, "one conditional send, one entry"
    await client.close()
    log = await read_all(broker.service_url, topic)
    assert [m.data() for m in log] == [b"first"] + [b"s%d" % i for i in range(50)]
    assert [m.offset for m in log] == list(range(51))


async def test_pipelined_conditional_sends_after_a_refusal_are_refused(broker):
    topic = unique("pipeline")
    client = AsyncClient(broker.service_url, operation_timeout_seconds=15)
    producer = await client.create_producer(topic)
    # All four are on the wire before any answer comes back. c and d were
    # planned assuming b lands; c's offset even matches what the topic will
    # have after a refused b, so only the offset epoch stops it.
    a, b, c, d = await settle([producer.send_nowait(data, expected_offset=offset)
                               for data, offset in [(b"a", 0), (b"b", 5), (b"c", 1), (b"d", 2)]])
    assert a.offset == 0
    assert [type(r) for r in (b, c, d)] == [errors.ExpectedOffsetMismatch] * 3
    assert b.next_offset == 1
    assert await client.get_next_offset(topic) == 1
    # Planned after the refusal (in the new epoch): accepted.
    assert (await producer.send(b"e", expected_offset=1)).offset == 1
    await client.close()
    assert [m.data() for m in await read_all(broker.service_url, topic)] == [b"a", b"e"]


@pytest.mark.parametrize("idempotent", [True, False])
def test_retry_of_a_stored_conditional_send(broker, idempotent):
    """The receipt of a stored conditional send is lost; the client resends it.
    Idempotent: the duplicate is answered with its original result. Without
    idempotence the resend is judged afresh and refused, though it is stored:
    the reason a leader using conditional publish wants idempotence too."""
    topic = unique("retry")
    proxy = CuttingProxy(broker.port)
    client = Client(proxy.url, operation_timeout_seconds=10, backoff_max_seconds=0.5)
    try:
        producer = client.create_producer(topic, idempotent=idempotent)
        producer.send(b"a", expected_offset=0)
        proxy.cut_next(Type.SEND_RECEIPT)
        if idempotent:
            assert producer.send(b"b", expected_offset=1).offset == 1
        else:
            with pytest.raises(errors.ExpectedOffsetMismatch) as refused:
                producer.send(b"b", expected_offset=1)
            assert refused.value.next_offset == 2
        assert proxy.cuts == 1
        assert producer.send(b"c", expected_offset=2).offset == 2
    finally:
        client.close()
        proxy.close()
    assert [m.data() for m in asyncio.run(read_all(broker.service_url, topic))] == [b"a", b"b", b"c"]


def test_get_next_offset(broker):
    with Client(broker.service_url, operation_timeout_seconds=10) as client:
        topic = unique("next")
        assert client.get_next_offset(topic) == 0
        producer = client.create_producer(topic, batching_enabled=True)
        for i in range(7):
            producer.send_async(b"%d" % i, None)
        producer.flush()
        assert client.get_next_offset(topic) == 7
        assert producer.send(b"x", expected_offset=7).offset == 7


@pytest.fixture
def small_ledgers_broker(tmp_path):
    proc = configured_broker(tmp_path, "[storage]\nmax_entries_per_ledger = 10\n").start()
    yield proc
    if proc.alive:
        proc.stop()


def test_offsets_stay_dense_across_ledger_rollover_and_restarts(small_ledgers_broker):
    broker = small_ledgers_broker
    topic = unique("dense")
    expected: list[bytes] = []

    def write_round(tag: str) -> None:
        with Client(broker.service_url, operation_timeout_seconds=15) as client:
            upcoming = client.get_next_offset(topic)
            assert upcoming == len(expected)
            producer = client.create_producer(topic, idempotent=True, batching_enabled=True,
                                              batching_max_messages=7, batching_max_publish_delay_ms=1)
            for i in range(25):  # 25 entries of one message: rolls over ledgers of 10 entries
                data = b"%s-single-%d" % (tag.encode(), i)
                assert producer.send(data, expected_offset=upcoming).offset == upcoming
                expected.append(data)
                upcoming += 1
            for size in (3, 7, 7, 1, 5):  # batches: one entry, several offsets
                batch = [b"%s-batch-%d-%d" % (tag.encode(), size, j) for j in range(size)]
                futures = []
                for j, data in enumerate(batch):
                    producer.send_async(data, lambda res, mid, out=futures: out.append((res, mid)),
                                        expected_offset=upcoming + j)
                producer.flush()
                assert [mid.offset for _, mid in futures] == list(range(upcoming, upcoming + size))
                expected.extend(batch)
                upcoming += size

    write_round("first")
    broker.restart()
    write_round("after-restart")
    broker.restart(crash=True)
    write_round("after-crash")
    log = asyncio.run(read_all(broker.service_url, topic))
    assert [m.data() for m in log] == expected
    assert [m.offset for m in log] == list(range(len(expected)))
    assert len({m.message_id().ledger_id() for m in log}) >= 9, "the log should span many ledgers"


# -- the kvstore example: two leaders of one shard at once ----------------------------

class ShardServerProcess:
    """``kvstore.py serve`` as a subprocess; ``port`` once it printed READY."""

    def __init__(self, broker, state_file: Path, topic_prefix: str) -> None:
        self.state_file = state_file
        self.proc = subprocess.Popen(
            [sys.executable, str(KVSTORE), "serve", "--shard", "0", "--role", "leader",
             "--service-url", broker.service_url, "--topic-prefix", topic_prefix,
             "--state-file", str(state_file), "--max-batch", "20"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self._ready: queue.Queue = queue.Queue()
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith("READY "):
                self._ready.put(dict(part.split("=", 1) for part in line.split()[1:]))

    def wait_ready(self, timeout: float = 30) -> int:
        try:
            return int(self._ready.get(timeout=timeout)["port"])
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"shard server not ready; stderr:\n{self.proc.stderr.read().decode()}") from None

    def stop(self) -> dict:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(60)
        assert code == 0, f"shard server exited with {code}; stderr:\n{self.proc.stderr.read().decode()}"
        return json.loads(self.state_file.read_text())


def test_two_kvstore_leaders_of_one_shard_never_corrupt_the_log(broker, tmp_path):
    prefix = f"{unique('kv')}-shard-"
    leaders = [ShardServerProcess(broker, tmp_path / f"leader-{i}.json", prefix) for i in range(2)]
    ports = [leader.wait_ready() for leader in leaders]
    out = tmp_path / "results.json"
    driver = subprocess.run(
        [sys.executable, str(KVSTORE), "load", "--ops", "600", "--keys", "3", "--concurrency", "6",
         "--seed", "7", "--out", str(out)] + [arg for port in ports for arg in ("--server", f"0=127.0.0.1:{port}")],
        capture_output=True, timeout=120,
    )
    assert driver.returncode == 0, driver.stderr.decode()
    states = [leader.stop() for leader in leaders]
    results = json.loads(out.read_text())

    log = asyncio.run(read_all(broker.service_url, f"{prefix}0"))
    assert [m.offset for m in log] == list(range(len(log)))
    replayed: dict = {}
    requests = []
    for m in log:  # each record read the value the log says its key had: never interleaved
        record = json.loads(m.data())
        assert replayed.get(record["key"]) == record["old"], f"stale write at offset {m.offset}: {record}"
        replayed[record["key"]] = record["new"]
        requests.append(record["request"])
    assert len(requests) == len(set(requests)), "a request was written twice"
    assert set(requests) == set(results["acked"]), "acknowledged writes and the log differ"
    assert not set(results["refused"]) & set(requests), "a refused write is in the log"
    assert not results["unavailable"]
    for name, ack in results["acked"].items():
        assert json.loads(log[ack["offset"]].data())["request"] == name
    # Both leaders wrote, both were refused at times (each wrote behind the other's back).
    assert all(s["writes"] > 0 and s["refusals"] > 0 for s in states), states
    assert sum(s["writes"] for s in states) == len(log)
    for state in states:
        assert state["values"] == replayed and state["next_offset"] == len(log) and state["stale_writes"] == 0
