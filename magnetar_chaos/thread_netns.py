"""A thread of this process on a host of the test bed: ``setns(2)`` of a
network namespace applies to the calling thread only, and the threads it
starts afterwards inherit it (the official client's I/O threads, Magnetar's
client loop thread), so clients made there reach the hosts by their
addresses as a program run with ``ip netns exec`` would.

- :func:`enter` moves the calling thread into a namespace (a path under
  ``/var/run/netns``, or a file descriptor kept from :func:`current`);
- :class:`HomeThread` is one worker thread made before the move, left in
  the namespace the process started in: what must run there (``ip link``
  on the bridge's side, the nemesis's commands) is handed to it.

Failure modes: :func:`enter` raises OSError with the errno of ``setns``
(EPERM when not root). :meth:`HomeThread.call` raises whatever the call
raised, in the caller's thread.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

CLONE_NEWNET = 0x40000000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def current() -> int:
    """A file descriptor of the calling thread's network namespace (the caller closes it)."""
    return os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)


def enter(namespace: str | int) -> None:
    """Move the calling thread into ``namespace``: a path, or an open descriptor."""
    fd = os.open(namespace, os.O_RDONLY) if isinstance(namespace, str) else namespace
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({namespace}): {os.strerror(err)}")
    finally:
        if isinstance(namespace, str):
            os.close(fd)


def named(name: str) -> str:
    """The path ``ip netns`` gives namespace ``name``."""
    return f"/var/run/netns/{name}"


class HomeThread:
    """One daemon thread that stays in the namespace its maker was in."""

    def __init__(self, name: str = "home-netns") -> None:
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            future, fn, args = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # handed back to the caller
                    future.set_exception(exc)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the home thread; its result, or its exception raised here."""
        if threading.current_thread() is self._thread:
            return fn(*args)
        future: Future = Future()
        self._calls.put((future, fn, args))
        return future.result()

    def close(self) -> None:
        self._calls.put(None)
        self._thread.join(30)
