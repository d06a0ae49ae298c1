"""EntryFetcher: bulk reads of a topic's stored entries (FETCH_ENTRIES, Magnetar-only).

A columnar reader (the Spark connector) wants a topic's entries as bytes,
many at a time, and nothing per entry in Python. A fetch asks the broker
for the entries from a start (an offset: the entry holding it; or a stored
position) within a byte budget and gets them back in one frame:
``[u32 count][u32 size]...`` then the stored entries back to back, each the
broker entry metadata followed by the producer's checksummed block. Parsing and checking
them is the caller's (``pyspark_magnetar.fetch_columns``).

The broker keeps no state between fetches (no subscription, no cursor): a
response says where the next fetch starts. The fetcher keeps one request
in flight ahead of the caller (sent as soon as the previous response
arrives, so the broker reads the next entries while the caller decodes),
and no more: flow control is that each response is bounded and asked for.
A fetch that fails for a reason a retry can fix (connection lost, topic
moving to another broker, storage not ready) is asked again, after a new
lookup, from the same start until ``retry_timeout_s``.

Failure modes: TopicNotFound, AuthorizationError, NotAllowedError at once;
the retryable ones (ConnectError, Timeout, ServiceUnitNotReady, ...) after
``retry_timeout_s``; AlreadyClosed after :meth:`close`.
"""
from __future__ import annotations

import asyncio
import time
from typing import NamedTuple

from magnetar.protocol.commands import Type, command

from .errors import (AlreadyClosed, AuthorizationError, InvalidTopicName, NotAllowedError, OperationNotSupported,
                     PulsarError, TopicNotFound)

#: What a response may carry: below the 5 MiB frame limit.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
_FATAL = (TopicNotFound, AuthorizationError, NotAllowedError, InvalidTopicName, OperationNotSupported, AlreadyClosed)


class Fetched(NamedTuple):
    """One response: ``count`` entries in ``data`` (``[u32 count][u32 size]...``
    then the entries), and the stored position the next fetch starts at."""

    data: memoryview
    count: int
    next_position: tuple[int, int]


class EntryFetcher:
    """The entries of one topic (a partition or a non-partitioned topic)
    from ``start_offset`` on, response by response (:meth:`next`). Create
    on the client's loop; call :meth:`close` when done."""

    def __init__(self, client, topic: str, start_offset: int, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_wait_ms: int = 1000, retry_timeout_s: float | None = None) -> None:
        self._client = client
        self._topic = topic
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._retry_timeout = client.operation_timeout if retry_timeout_s is None else retry_timeout_s
        self._closed = False
        self._url: str | None = None  # the owner's, looked up again after a failure
        self.fetches = 0  # responses received, for tests and benches
        self.retries = 0  # fetches asked again after a retryable failure (a move, a lost connection)
        self._ahead: asyncio.Task = asyncio.get_running_loop().create_task(self._fetch({"start_offset": start_offset}))

    async def next(self) -> Fetched:
        """The next response (maybe of no entries: nothing new within
        ``max_wait_ms``), and the fetch after it sent at once."""
        if self._closed:
            raise AlreadyClosed("the entry fetcher is closed")
        got = await self._ahead
        self.fetches += 1
        lid, eid = got.next_position
        self._ahead = asyncio.get_running_loop().create_task(
            self._fetch({"start_ledger_id": lid, "start_entry_id": eid}))
        return got

    async def _fetch(self, start: dict) -> Fetched:
        deadline = time.monotonic() + self._retry_timeout
        delay = 0.05
        client = self._client
        while True:
            try:
                if self._url is None:
                    self._url = await client.lookup(self._topic)
                conn = await client.connection_to(self._url, client.operation_timeout)
                wait_s = self._max_wait_ms / 1000
                frame = await conn.request(
                    command(Type.FETCH_ENTRIES, request_id=client.new_request_id(), topic=self._topic,
                            max_bytes=self._max_bytes, max_wait_ms=self._max_wait_ms, **start),
                    client.operation_timeout + wait_s)
                reply = frame.command.fetchEntriesResponse
                data = frame.block.raw if frame.block is not None else memoryview(b"")
                return Fetched(data, reply.num_entries, (reply.next_ledger_id, reply.next_entry_id))
            except _FATAL:
                raise
            except PulsarError:
                self._url = None
                self.retries += 1
                if self._closed or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def close(self) -> None:
        self._closed = True
        self._ahead.cancel()
        try:
            await self._ahead
        except (asyncio.CancelledError, Exception):  # nothing held on the broker: a fetch in flight is just dropped
            pass
