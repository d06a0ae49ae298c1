"""How long a thread has waited for a core: runnable, but not running.

Linux keeps it per thread, in nanoseconds, as the second field of
``/proc/self/task/<tid>/schedstat`` (kernels built with
``CONFIG_SCHED_INFO``, as distributions' are). When the broker's loop
waits for a core, everything it does is late by that much, and each
commit's fixed cost (waking the object store's and etcd's client threads,
the store's and etcd's own CPU) is paid out of the cores it is short of
(:mod:`.budget_pacer`).

:func:`core_wait_reader` returns a reader bound to the calling thread, or
None where there is nothing to read (another system, /proc not mounted):
the caller then does without. A reader returns the thread's total wait in
seconds, or None once it cannot read it (the thread ended). No exception
leaves either.
"""
from __future__ import annotations

import threading
from typing import Callable

CoreWait = Callable[[], "float | None"]


def read_wait_s(path: str) -> float | None:
    """The wait in seconds recorded in the schedstat file ``path``, or None."""
    try:
        with open(path, "rb") as f:
            fields = f.read(128).split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def core_wait_reader(tid: int | None = None) -> CoreWait | None:
    """A reader of thread ``tid``'s wait for a core (the calling thread's
    by default), or None if this system does not record it."""
    path = f"/proc/self/task/{tid if tid is not None else threading.get_native_id()}/schedstat"
    if read_wait_s(path) is None:
        return None
    return lambda: read_wait_s(path)
