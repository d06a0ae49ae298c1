"""Sealed ledgers wait for their compaction round and go together (no I/O)."""
from __future__ import annotations

import asyncio

from magnetar.storage.object.compaction_rounds import CompactionRounds
from magnetar.storage.object.object_ledger import ObjectLedger


def test_ledgers_sealed_within_a_round_start_together_and_a_deleted_one_not_at_all():
    async def run() -> list[list[int]]:
        started: list[list[int]] = []
        rounds = CompactionRounds(lambda ledgers: started.append([l.ledger_id for l in ledgers]), every_s=0.2)
        rounds.add(ObjectLedger(1, 0))
        await asyncio.sleep(0.1)
        rounds.add(ObjectLedger(2, 0))
        rounds.add(ObjectLedger(3, 0))
        rounds.discard(2)  # deleted meanwhile
        assert 1 in rounds and 2 not in rounds and started == []
        deadline = asyncio.get_running_loop().time() + 5
        while not started and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        assert started == [[1, 3]] and len(rounds) == 0 and rounds.rounds == 1
        rounds.add(ObjectLedger(4, 0))  # the next round's first
        rounds.stop()  # closing: none of them
        await asyncio.sleep(0.3)
        return started

    assert asyncio.run(run()) == [[1, 3]]
