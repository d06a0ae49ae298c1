"""Start a Python program under libfaketime with a ``time.sleep`` that works.

``python -m magnetar_chaos.clock_boot -m MODULE ARGS...`` runs MODULE as
``python -m`` would; ``... -c CODE`` runs CODE. Before that, ``time.sleep``
becomes a ``select()`` timeout.

Why: the clock-jump fault (:mod:`.clock`) runs brokers under libfaketime
with ``FAKETIME_DONT_FAKE_MONOTONIC=1``, and libfaketime 0.9.10 then breaks
``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` (EINVAL: it hands the
kernel a deadline shifted as if the monotonic clock were faked), which is
how Python 3.11's ``time.sleep`` sleeps. ``select()`` takes a relative
timeout, which libfaketime leaves alone. The replacement keeps the
contract: sleeps at least ``seconds`` (resuming after a signal, as
``select`` does since PEP 475), ValueError for a negative value. Only this
harness starts processes this way; the broker's own code is unchanged.
"""
from __future__ import annotations

import runpy
import select
import sys
import time


def _sleep(seconds: float) -> None:
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        select.select([], [], [], left)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("-m", "-c"):
        raise SystemExit("usage: python -m magnetar_chaos.clock_boot (-m MODULE | -c CODE) [ARGS...]")
    time.sleep = _sleep
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *argv[2:]]
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})


if __name__ == "__main__":
    main(sys.argv[1:])
