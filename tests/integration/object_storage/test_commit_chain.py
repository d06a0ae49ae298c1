"""Chained commit transactions (storage/object/commit_chain.py): the next
commit's transaction goes while the previous one is unanswered, and lands
only if that one did. Real SeaweedFS and real etcd; etcd paused (SIGSTOP),
or one answer held back or lost on the way to the committer."""
from __future__ import annotations

import asyncio

from magnetar.metadata import MetadataError
from magnetar.storage import StorageError
from magnetar.storage.object.commit_records import COMMITS
from tests.helpers import wait_until

from .test_object_ledgers import open_factory, reads_back_elsewhere


class HeldAnswers:
    """The real store, except that the transaction putting the first commit
    record after :meth:`arm` is held back: sent at once (``send_first``) or
    only after the next one is answered, and its answer then given (or
    lost: ``lose_first``) once the next commit's transaction is answered."""

    def __init__(self, store, *, send_first: bool, lose_first: bool = False) -> None:
        self._store = store
        self._send_first = send_first
        self._lose_first = lose_first
        self._armed = False
        self._seen = 0
        self.second_answered = asyncio.Event()

    def arm(self) -> None:
        self._armed = True

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def _second(self) -> None:
        try:  # bounded: a committer that never sends the next one must fail its test, not hang it
            await asyncio.wait_for(self.second_answered.wait(), 10)
        except asyncio.TimeoutError:
            pass

    async def transaction(self, compares, writes, **kw):
        if not self._armed or not any(w.key.startswith(COMMITS) for w in writes):
            return await self._store.transaction(compares, writes, **kw)
        self._seen += 1
        if self._seen == 1:
            if self._send_first:
                result = await self._store.transaction(compares, writes, **kw)
                await self._second()
            else:  # overtaken: the next one reaches the store first
                await self._second()
                result = await self._store.transaction(compares, writes, **kw)
            if self._lose_first:
                raise MetadataError("the answer was lost on the way")
            return result
        try:
            return await self._store.transaction(compares, writes, **kw)
        finally:
            if self._seen == 2:
                self.second_answered.set()


async def two_commits(ml, committer) -> tuple[asyncio.Future, asyncio.Future]:
    """Append ``a`` then ``b`` to ``ml``, each in a commit of its own."""
    puts = committer.puts
    first = asyncio.ensure_future(ml.append(b"a"))
    await wait_until(lambda: committer.puts == puts + 1, what="the first commit's PUT")
    second = asyncio.ensure_future(ml.append(b"b"))
    return first, second


async def test_the_next_commit_sends_its_transaction_while_the_previous_one_is_unanswered(
        tmp_path, etcd_store, etcd_server, objects_url):
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=50)
    ml = await factory.open("t/chained")
    acked = [await ml.append(b"warm-up")]
    committer = factory.backend.committer
    transactions = committer.transactions
    etcd_server.pause()  # the first transaction goes unanswered
    try:
        first, second = await two_commits(ml, committer)
        await wait_until(lambda: committer.transactions == transactions + 1, what="the first transaction")
        # before: the second waited for the first's answer
        await wait_until(lambda: committer.transactions == transactions + 2, timeout=5,
                         what="the second transaction, sent before the first is answered")
        assert not first.done() and not second.done()  # no receipt before its transaction
    finally:
        etcd_server.resume()
    acked += [await first, await second]
    assert committer.chained >= 1
    assert [(p.ledger_id, p.entry_id) for p in acked] == [(acked[0].ledger_id, i) for i in range(3)]
    await factory.close()
    await reads_back_elsewhere(tmp_path / "again", etcd_store, objects_url, "t/chained",
                               [b"warm-up", b"a", b"b"], acked)


async def test_a_transaction_that_overtakes_the_one_it_follows_goes_again_once_that_one_landed(
        tmp_path, etcd_store, objects_url):
    held = HeldAnswers(etcd_store, send_first=False)
    factory = open_factory(tmp_path, held, objects_url, interval_ms=50)
    ml = await factory.open("t/overtaken")
    acked = [await ml.append(b"warm-up")]
    committer = factory.backend.committer
    held.arm()
    first, second = await two_commits(ml, committer)
    acked += [await first, await second]
    # the second's compare failed (the first's record was not there yet); it
    # went again as soon as the first was answered, with the same record key
    assert (committer.chained, committer.chain_resends, committer.chain_retries) == (1, 1, 0)
    assert [(p.ledger_id, p.entry_id) for p in acked] == [(acked[0].ledger_id, i) for i in range(3)]
    await factory.close()
    await reads_back_elsewhere(tmp_path / "again", etcd_store, objects_url, "t/overtaken",
                               [b"warm-up", b"a", b"b"], acked)


async def test_a_chained_commit_after_one_of_unknown_outcome_gives_no_receipt_for_its_ledger(
        tmp_path, etcd_store, objects_url):
    held = HeldAnswers(etcd_store, send_first=True, lose_first=True)
    factory = open_factory(tmp_path, held, objects_url, interval_ms=50)
    ml = await factory.open("t/unknown")
    await ml.append(b"warm-up")
    committer = factory.backend.committer
    ledger = ml._appends.current
    held.arm()
    first, second = await two_commits(ml, committer)
    results = await asyncio.gather(first, second, return_exceptions=True)
    await wait_until(lambda: not committer._running, what="both commits to end")
    # this broker counts the ledger's sections up to the gap it knows of, not past it
    assert (ledger.entry_count, len(ledger.sections)) == (1, 1)
    # Both records landed (the second compares the first's), but the first's
    # answer was lost: neither is acknowledged (before: the second was,
    # past a section this broker never counted).
    assert all(isinstance(r, StorageError) for r in results), results
    assert (committer.chained, committer.chain_retries) == (1, 0)
    await factory.close()


async def test_every_acknowledged_entry_of_many_chained_commits_reads_back_in_order(
        tmp_path, etcd_store, objects_url):
    """Many topics, commits back to back: what was acknowledged reads back
    at its position from a broker that never wrote it, each topic in order."""
    factory = open_factory(tmp_path, etcd_store, objects_url, interval_ms=1)
    mls = [await factory.open(f"t/many-{i}") for i in range(20)]
    committer = factory.backend.committer

    async def produce(i: int, ml) -> list:
        sent = []
        for n in range(30):  # without waiting for receipts: commits follow each other closely
            sent.append(asyncio.ensure_future(ml.append(f"{i}-{n}".encode())))
            await asyncio.sleep(0.002)
        return await asyncio.gather(*sent)

    acked = await asyncio.gather(*(produce(i, ml) for i, ml in enumerate(mls)))
    assert committer.commits >= 10 and committer.chained >= 1
    await factory.close()
    for i, positions in enumerate(acked):
        await reads_back_elsewhere(tmp_path / f"again-{i}", etcd_store, objects_url, f"t/many-{i}",
                                   [f"{i}-{n}".encode() for n in range(30)], positions)
