"""A Magnetar asyncio client driven from blocking code (Spark's Python
workers call the connector synchronously).

:class:`BrokerSession` runs an :class:`~magnetar.client.AsyncClient` on an
event loop in a daemon thread and lets the caller submit whole coroutines.
The connector submits one coroutine per *chunk* of work (thousands of
messages), not per message: the thread hop is the expensive part of a
blocking facade, and the loop keeps receiving (and answering keepalives)
while Spark consumes the previous chunk.

Sessions are opened lazily inside ``read()``/``write()`` and the driver-side
methods, never in constructors, because Spark pickles readers and writers
and may call ``stop()`` on them or not at all. A daemon thread and a socket
left behind by an unclosed session die with the worker process.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, TypeVar

from magnetar.client import AsyncClient

T = TypeVar("T")


class BrokerSession:
    """An AsyncClient on a private loop thread. Use as a context manager or
    call :meth:`close`; both are idempotent.

    Raises the client's InvalidUrl at once for a malformed service URL;
    connection errors surface from the first :meth:`run`.
    """

    def __init__(self, service_url: str, operation_timeout_s: float = 30.0) -> None:
        self.client = AsyncClient(service_url, operation_timeout_s)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="magnetar-spark", daemon=True)
        self._thread.start()
        self._closed = False

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the session's loop and return its result (or raise
        its exception). ``timeout`` bounds the wait, then cancels ``coro``."""
        if self._closed:
            coro.close()
            raise RuntimeError("broker session is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.run(self.client.close(), timeout=10)
        except Exception:
            pass  # closing is best effort: the broker cleans up after a dropped connection
        finally:
            self._closed = True
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            if not self._thread.is_alive():
                self._loop.close()

    def __enter__(self) -> "BrokerSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
