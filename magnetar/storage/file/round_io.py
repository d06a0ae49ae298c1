"""A group commit's per-ledger system calls, batched: one call per round.

The group-commit writer (:mod:`.group_commit`) writes a round's ledgers to
their segment files, opens again the files the pool had closed, and
checks each ledger's fence marker. Each system call made from Python
gives up the GIL and waits to get it back from the event loop thread,
busy with the same traffic (up to the 5 ms switch interval); a round that
wrote 30 ledgers paid that wait per call. These functions do a round's
calls of one kind in one go; compiled (``_round.c``, built by setup.py)
they give up the GIL once for all of them.

- ``write_all(fds, bufs)`` -> per item ``0`` or the errno that stopped it:
  each buffer written whole at its descriptor's offset (short writes and
  EINTR retried);
- ``reopen(close_fds, paths, flags)`` -> per path a new descriptor (not
  inheritable, mode 0644) or minus the errno: closes ``close_fds`` first
  (errors ignored);
- ``exist(paths)`` -> per path whether it exists (``os.path.exists``).

The pure-Python twins below are what runs when the extension was not
built or ``MAGNETAR_PURE_PYTHON=1``; ``implementation()`` says which.
"""
from __future__ import annotations

import os
from typing import Sequence


def write_all_python(fds: Sequence[int], bufs: Sequence[bytes]) -> list[int]:
    out = []
    for fd, buf in zip(fds, bufs, strict=True):
        err = 0
        view = memoryview(buf)
        try:
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            err = exc.errno or 0
        out.append(err)
    return out


def reopen_python(close_fds: Sequence[int], paths: Sequence[str], flags: Sequence[int]) -> list[int]:
    if len(paths) != len(flags):
        raise ValueError("paths and flags differ in length")
    for fd in close_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    out = []
    for path, flag in zip(paths, flags):
        try:
            out.append(os.open(path, flag, 0o644))
        except OSError as exc:
            out.append(-(exc.errno or 0))
    return out


def exist_python(paths: Sequence[str]) -> list[bool]:
    return [os.path.exists(path) for path in paths]


write_all = write_all_python
reopen = reopen_python
exist = exist_python
_compiled = None
if os.environ.get("MAGNETAR_PURE_PYTHON", "") not in ("1", "true", "yes"):
    try:
        from . import _round as _compiled
    except ImportError:  # not built here: the Python twins run
        _compiled = None
    if _compiled is not None:
        write_all, reopen, exist = _compiled.write_all, _compiled.reopen, _compiled.exist


def implementation() -> str:
    """``"compiled"`` or ``"python"``: which twins this process runs."""
    return "compiled" if _compiled is not None else "python"
