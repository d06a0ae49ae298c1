"""Two leaders of one shard at once (a leader change in progress), issue 6.

Each leader keeps a key-value state and the upcoming offset it believes in. It
turns client requests into conditional sends "key: old -> new" expecting its
offset; on a refusal it fails those requests and bootstraps again from the log.
Hypothesis drives random schedules of the two (who sends, how many in flight,
when a refusal is noticed). Afterwards:

- replaying the log, every operation's ``old`` matches the replayed value (no
  operation was written from a stale view: never interleaved);
- every request a leader acknowledged is in the log exactly once and every
  refused one is absent (nothing duplicated or lost).
"""
from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.broker.entries.entry_format import entry_info, producer_block
from magnetar.broker.errors import ExpectedOffsetMismatch
from magnetar.protocol.frames import PayloadBlock

from .harness import close_service, make_service, producer, send_of, topic_of


class Leader:
    def __init__(self, name: str, topic) -> None:
        self.name = name
        self.topic = topic
        self.producer = producer(topic, hash(name) & 0xFFFF, name=name)
        self.state: dict[str, int] = {}
        self.offset = 0
        self.epoch = 0
        self.seq = 0
        self.in_flight: list[tuple[str, asyncio.Future]] = []
        self.acked: list[str] = []
        self.refused: list[str] = []

    async def bootstrap(self) -> None:
        self.state, self.offset = await replay(self.topic)

    def propose(self, key: str) -> None:
        old = self.state.get(key, 0)
        request = f"{self.name}-{self.seq}"
        op = json.dumps({"key": key, "old": old, "new": old + 1, "request": request}).encode()
        send, block = send_of(self.name, self.seq, op, expected_offset=self.offset, offset_epoch=self.epoch)
        self.seq += 1
        self.state[key] = old + 1  # optimistic: the leader's view assumes its own writes land
        self.offset += 1
        self.in_flight.append((request, self.topic.publish(self.producer, send, block)))

    async def settle_one(self) -> None:
        if not self.in_flight:
            return
        request, fut = self.in_flight.pop(0)
        try:
            await fut
            self.acked.append(request)
        except ExpectedOffsetMismatch as refusal:
            # Fail this and everything pipelined behind it, then bootstrap.
            self.refused.append(request)
            self.epoch = refusal.offset_epoch
            for other, later in self.in_flight:
                try:
                    await later
                    self.acked.append(other)  # cannot happen: later ones expected more
                except ExpectedOffsetMismatch:
                    self.refused.append(other)
            self.in_flight.clear()
            await self.bootstrap()


async def replay(topic) -> tuple[dict[str, int], int]:
    """The state the log describes, checking each operation's precondition."""
    state: dict[str, int] = {}
    count = 0
    start = topic.ledger.first_position()
    while start is not None:
        entries = await topic.ledger.read_entries(start, 100)
        if not entries:
            break
        for entry in entries:
            assert entry_info(entry.data).first_offset == count
            op = json.loads(bytes(PayloadBlock(producer_block(entry.data)).payload))
            assert state.get(op["key"], 0) == op["old"], f"stale write in the log: {op}"
            state[op["key"]] = op["new"]
            count += 1
        start = topic.ledger.next_position(entries[-1].position)
    return state, count


async def requests_in_log(topic) -> list[str]:
    out = []
    start = topic.ledger.first_position()
    while start is not None:
        entries = await topic.ledger.read_entries(start, 100)
        if not entries:
            break
        out += [json.loads(bytes(PayloadBlock(producer_block(e.data)).payload))["request"] for e in entries]
        start = topic.ledger.next_position(entries[-1].position)
    return out


STEPS = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["propose", "settle"]), st.sampled_from("xyz")),
    min_size=1, max_size=40,
)


@given(steps=STEPS)
@settings(max_examples=40, deadline=None)
def test_two_leaders_never_corrupt_the_log(steps):
    asyncio.run(_run(steps))


async def _run(steps) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="magnetar-leaders-"))
    service = await make_service(tmp)
    try:
        topic = await topic_of(service, "shard-0")
        leaders = {name: Leader(name, topic) for name in "ab"}
        for leader in leaders.values():
            await topic.add_producer(leader.producer, None)
            await leader.bootstrap()
        for who, action, key in steps:
            leader = leaders[who]
            if action == "propose":
                leader.propose(key)
            else:
                await leader.settle_one()
        for leader in leaders.values():
            while leader.in_flight:
                await leader.settle_one()
        await replay(topic)  # asserts every precondition
        logged = await requests_in_log(topic)
        acked = leaders["a"].acked + leaders["b"].acked
        refused = leaders["a"].refused + leaders["b"].refused
        assert sorted(logged) == sorted(acked), "acknowledged requests and the log differ"
        assert len(set(logged)) == len(logged), "a request was written twice"
        assert not set(refused) & set(logged), "a refused request is in the log"
    finally:
        await close_service(service)
        shutil.rmtree(tmp, ignore_errors=True)
