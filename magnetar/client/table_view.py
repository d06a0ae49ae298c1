"""TableView: a topic seen as a map from key to latest value, kept up to date.

Contract: :meth:`AsyncTableView.create` opens a ``read_compacted`` reader at
the earliest position and reads until the broker has nothing more
(``has_message_available``), so the returned view holds, for every key, the
value of the key's latest message published before it was created. It then
keeps reading in the background: later messages update the map and are
passed to listeners. Keys are partition keys; messages without a key are
ignored; a message with an empty payload (or a null value) deletes its key,
as in Pulsar's table views.

Failure modes: creation raises what creating the reader raises (Timeout,
TopicNotFound...). If the background reader fails for good (client closed),
the view stops updating and ``error`` says why; ``get`` keeps answering from
what was read.

The blocking :class:`TableView` wraps the async one for :class:`~.sync.Client`.
Its reads (``get``, ``snapshot``) need no round trip to the loop thread.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .errors import AlreadyClosed
from .message import Message
from .message_id import MessageId

if TYPE_CHECKING:  # reader.py does not import this module: no circle
    from .reader import AsyncReader


class ReaderFactory(Protocol):
    """What a table view uses of its client (``aio.AsyncClient``, which imports
    this module): opening a reader."""

    async def create_reader(self, topic: str, start_message_id: MessageId, start_message_id_inclusive: bool = False,
                            receiver_queue_size: int = 1000, reader_name: str | None = None,
                            subscription_role_prefix: str | None = None,
                            is_read_compacted: bool = False) -> "AsyncReader": ...

log = logging.getLogger(__name__)

Listener = Callable[[str, "bytes | None"], Any]


class AsyncTableView:
    def __init__(self, reader: "AsyncReader") -> None:
        self._reader = reader
        self._data: dict[str, bytes] = {}
        self._listeners: list[Listener] = []
        self._task: asyncio.Task | None = None
        self.error: BaseException | None = None

    @classmethod
    async def create(cls, client: ReaderFactory, topic: str) -> "AsyncTableView":
        reader = await client.create_reader(topic, MessageId.earliest, is_read_compacted=True)
        view = cls(reader)
        try:
            while await reader.has_message_available():
                view._apply(await reader.read_next())
        except BaseException:
            await reader.close()
            raise
        view._task = asyncio.get_running_loop().create_task(view._follow())
        return view

    def _apply(self, msg: Message) -> None:
        if not msg.has_partition_key():
            return
        key = msg.partition_key()
        value = msg.data()
        if value:
            self._data[key] = value
        else:
            self._data.pop(key, None)
        for listener in list(self._listeners):
            try:
                listener(key, value or None)
            except Exception:  # a listener's bug must not stop the view
                log.exception("table view listener failed")

    async def _follow(self) -> None:
        try:
            while True:
                self._apply(await self._reader.read_next())
        except asyncio.CancelledError:
            raise
        except AlreadyClosed as exc:
            self.error = exc
        except Exception as exc:
            log.exception("table view of %s stopped", self._reader.topic())
            self.error = exc

    # -- reading -----------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        return self._data.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def snapshot(self) -> dict[str, bytes]:
        """A copy of the whole map."""
        return dict(self._data)

    def for_each(self, callback: Listener) -> None:
        for key, value in list(self._data.items()):
            callback(key, value)

    def listen(self, callback: Listener) -> None:
        """Call ``callback(key, value)`` for every later update (value None: deleted)."""
        self._listeners.append(callback)

    def for_each_and_listen(self, callback: Listener) -> None:
        self.for_each(callback)
        self.listen(callback)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        await self._reader.close()


class TableView:
    """Blocking facade over :class:`AsyncTableView` (listeners run on the client's loop thread)."""

    def __init__(self, loop, view: AsyncTableView) -> None:
        self._loop = loop
        self._view = view

    def get(self, key: str) -> bytes | None:
        return self._view.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._view

    def __len__(self) -> int:
        return len(self._view)

    def snapshot(self) -> dict[str, bytes]:
        return self._view.snapshot()

    def for_each(self, callback: Listener) -> None:
        self._view.for_each(callback)

    def for_each_and_listen(self, callback: Listener) -> None:
        self._loop.run(self._call(lambda: self._view.for_each_and_listen(callback)))

    @staticmethod
    async def _call(fn: Callable[[], Any]) -> Any:
        return fn()

    def close(self) -> None:
        self._loop.run(self._view.close())
