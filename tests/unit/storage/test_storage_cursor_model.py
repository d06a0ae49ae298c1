"""The cursor's ack bookkeeping against a model: a set of acked entry indexes.

Entries span several small ledgers, so runs and mark-delete moves cross
ledger boundaries; the machine also reopens the managed ledger (same data
directory and store) to check that what was persisted is what was acked.
"""
from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage import ManagedLedgerFactory, StorageConfig

N = 14
indexes = st.integers(min_value=0, max_value=N - 1)


class CursorModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="cursor-model-"))
        self.store = MemoryMetadataStore()
        self.acked: set[int] = set()
        self.reopens = 0
        self.run(self._open(first=True))

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    async def _open(self, first: bool = False) -> None:
        config = StorageConfig(sync_policy="never", max_entries_per_ledger=3)
        self.factory = ManagedLedgerFactory(self.dir, self.store, config)
        self.ml = await self.factory.open("t")
        if first:
            self.positions = list(await asyncio.gather(*(self.ml.append(b"%d" % i) for i in range(N))))
        self.cursor = await self.ml.open_cursor("c", "earliest")
        await self.ml.open_cursor("holder", "earliest")  # nothing gets trimmed

    def teardown(self) -> None:
        self.run(self.factory.close())
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------- rules

    @rule(picks=st.lists(indexes, max_size=5))
    def delete(self, picks):
        self.run(self.cursor.delete([self.positions[i] for i in picks]))
        self.acked |= set(picks)

    @rule(i=indexes)
    def mark_delete(self, i):
        self.run(self.cursor.mark_delete(self.positions[i]))
        self.acked |= set(range(i + 1))

    @rule(i=indexes)
    def reset(self, i):
        self.run(self.cursor.reset(self.positions[i]))
        self.acked = set(range(i))

    @precondition(lambda self: self.reopens < 2)
    @rule()
    def reopen(self):
        self.reopens += 1
        self.run(self.factory.close())
        self.run(self._open())

    # -------------------------------------------------------- invariants

    def prefix(self) -> int:
        """Index of the last entry of the acked prefix; -1 if none."""
        k = -1
        while k + 1 in self.acked:
            k += 1
        return k

    @invariant()
    def mark_delete_matches_prefix(self):
        md = self.cursor.mark_delete_position
        k = self.prefix()
        if k >= 0:
            assert md >= self.positions[k]
        if k + 1 < N:
            assert md < self.positions[k + 1]

    @invariant()
    def acks_match(self):
        c = self.cursor
        for i, pos in enumerate(self.positions):
            assert c.is_deleted(pos) == (i in self.acked), (i, pos)
        assert c.backlog() == N - len(self.acked)
        in_ranges = set()
        for first, last in c.individually_deleted_ranges():
            assert first.ledger_id == last.ledger_id and first <= last
            in_ranges |= {i for i, p in enumerate(self.positions) if first <= p <= last}
        assert in_ranges == {i for i in self.acked if i > self.prefix()}

    @invariant()
    def reads_skip_acked(self):
        c = self.cursor
        c.rewind()
        got = self.run(c.read_entries(N))
        assert [e.position for e in got] == [p for i, p in enumerate(self.positions) if i not in self.acked]
        assert [e.data for e in got] == [b"%d" % i for i in range(N) if i not in self.acked]
        c.rewind()


CursorModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCursorModel = CursorModel.TestCase
