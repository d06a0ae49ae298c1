"""Processes that die with the process that started them."""
from __future__ import annotations

import shutil


def dying_with_parent(args: list[str], signal_name: str = "KILL") -> list[str]:
    """``args`` run so that the kernel sends them ``signal_name`` when the
    process that started them dies (PR_SET_PDEATHSIG, set by util-linux's
    ``setpriv``, which then execs them in place; it lasts through ``ip netns
    exec``'s exec too). KILL by default: a broker left stopped (SIGSTOP)
    would keep a pending TERM for ever. The kernel ties the signal to the
    starting *thread*: start them from one that outlives them (the chaos
    run's main thread does every start). Not a ``preexec_fn``: running
    Python between fork and exec in a process full of client threads can
    deadlock. Without setpriv, ``args`` as they are: the starter's own
    clean-up still stops them, unless it is SIGKILLed."""
    if shutil.which("setpriv") is None:
        return args
    return ["setpriv", "--pdeathsig", signal_name, *args]
