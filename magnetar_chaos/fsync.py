"""The ``fsync-error`` fault: a broker's ``fsync``/``fdatasync`` calls fail
with EIO for a second or three, as a failing disk makes them.

This kernel has no device-mapper (no ``dm-error``/``dm-flakey``), so the
errors are injected with ptrace: ``strace -f -p <pid>`` attaches to every
thread of the broker and, for the calls chosen (every one, or every second
or third: :func:`draw_fsync_fault`), skips the real syscall and returns
``-1 EIO`` to the broker. The broker sees exactly what a failing disk gives
it; the data it wrote stays in the page cache (the skipped fsync did not
drop it), so what it must not do is *acknowledge* what it could not sync,
nor lose what it had acknowledged, nor stop serving.

While attached, strace stops the broker at every system call (seccomp
filtering only works on processes strace starts), so the broker runs slower
for the fault's duration, like a slow disk besides a failing one.

Never leaving the broker traced or stopped is the contract of
:meth:`FsyncErrors.inject`: strace gets SIGINT (it detaches from every
thread and exits), then SIGTERM, then SIGKILL (the kernel detaches a dead
tracer's tracees); then the broker is checked in ``/proc`` and sent SIGCONT
if it was left stopped. That runs on return, on an exception, on Ctrl-C and
SIGTERM (the CLI turns it into KeyboardInterrupt), at exit as a last resort,
and if the chaos run itself dies by SIGKILL, strace is sent SIGINT by the
kernel (``PR_SET_PDEATHSIG``, through ``setpriv`` where installed) and
detaches on its own.

Failure modes: :class:`FsyncErrorsUnavailable` (a ValueError: the run is
refused up front, one line) when strace is missing or this process may not
ptrace (no CAP_SYS_PTRACE and a Yama ``ptrace_scope`` above 0, or a probe
attach refused); :class:`InjectionError` if strace does not attach to the
broker (it exited, say): nothing is left attached.
"""
from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from magnetar_harness.lifetime import dying_with_parent

#: fsync(2) and fdatasync(2): the ledgers use fdatasync, seals, directory
#: syncs and SQLite (the standalone metadata store) use fsync.
SYSCALLS = ("fdatasync", "fsync")
CAP_SYS_PTRACE = 19
ATTACH_TIMEOUT_S = 10.0
DETACH_TIMEOUT_S = 5.0


class FsyncErrorsUnavailable(ValueError):
    """The fsync-error fault cannot run here (no strace, no right to ptrace)."""


class InjectionError(RuntimeError):
    """strace did not attach to the broker."""


@dataclass(frozen=True)
class FsyncFault:
    """One fault: for ``hold_s`` seconds, every ``every``-th fsync/fdatasync
    of each thread fails (1: all of them)."""
    hold_s: float
    every: int

    def describe(self) -> str:
        which = "every" if self.every == 1 else f"1 in {self.every}"
        return f"{which} fsync for {self.hold_s:.1f} s"


def draw_fsync_fault(rng: random.Random) -> FsyncFault:
    """1-3 s; every call failing half the time, else one in two or three, so
    good syncs follow bad ones (what a flaky disk does, and where a broker
    that forgot a failed sync would acknowledge what it never synced)."""
    return FsyncFault(rng.uniform(1.0, 3.0), rng.choice((1, 1, 2, 3)))


def strace_command(pid: int, every: int) -> list[str]:
    """The strace line that fails ``every``-th call of SYSCALLS of ``pid``'s
    threads with EIO (``when=1+k``: calls 1, 1+k, 1+2k...)."""
    when = "" if every == 1 else f":when=1+{every}"
    args = ["strace", "-f", "-p", str(pid), "-e", f"trace={','.join(SYSCALLS)}"]
    for name in SYSCALLS:
        args += ["-e", f"inject={name}:error=EIO{when}"]
    return args


def _has_cap_sys_ptrace() -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1)
    except (OSError, ValueError):
        pass
    return False


def _ptrace_scope() -> int:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return 0  # no Yama: the classic rule (same user, or CAP_SYS_PTRACE)


def unavailable_reason() -> str | None:
    """Why this process cannot inject fsync errors, or None if it can.
    Checks the rules, then attaches to a child of its own once (a container's
    seccomp profile may forbid ptrace whatever the rules say)."""
    if shutil.which("strace") is None:
        return "the fsync-error fault needs strace, which is not installed: install it or leave fsync-error out of --faults"
    scope = _ptrace_scope()
    if scope >= 3 or (scope >= 1 and not _has_cap_sys_ptrace()):
        return (f"the fsync-error fault attaches strace to the broker, which needs CAP_SYS_PTRACE or "
                f"kernel.yama.ptrace_scope=0 (it is {scope}): run as root or leave fsync-error out of --faults")
    return _probe()


def _probe() -> str | None:
    target = subprocess.Popen(["sleep", "30"])
    try:
        tracer = _Tracer(["strace", "-p", str(target.pid), "-e", "trace=none"])
        try:
            tracer.wait_attached(ATTACH_TIMEOUT_S)
        except InjectionError as exc:
            return (f"the fsync-error fault cannot attach strace here ({exc}): it needs CAP_SYS_PTRACE "
                    f"and ptrace allowed; leave fsync-error out of --faults")
        finally:
            tracer.detach(target.pid)
    finally:
        target.kill()
        target.wait()
    return None


class _Tracer:
    """One strace process; its stderr read on a thread: attach messages, and
    one line per traced call (``... = -1 EIO (Input/output error) (INJECTED)``)."""

    def __init__(self, args: list[str]) -> None:
        self.attached = threading.Event()
        self.injected = 0
        self.lines: list[str] = []
        self.proc = subprocess.Popen(dying_with_parent(args, "INT"), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            if "(INJECTED)" in line:
                self.injected += 1
            elif " attached" in line:
                self.attached.set()
            elif len(self.lines) < 20:
                self.lines.append(line.strip())

    def wait_attached(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.attached.wait(0.05):
            if self.proc.poll() is not None:
                self._reader.join(1.0)
                raise InjectionError("; ".join(self.lines) or f"strace exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise InjectionError(f"strace did not attach in {timeout:.0f} s")

    def detach(self, pid: int) -> None:
        """Stop strace (it detaches), harder if it hangs; then make sure
        ``pid`` is neither traced nor left stopped. Idempotent, never raises."""
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                self.proc.send_signal(sig)
                self.proc.wait(DETACH_TIMEOUT_S)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                continue
        if self.proc.poll() is None:  # unkillable: nothing more we can do
            return
        self._reader.join(DETACH_TIMEOUT_S)
        _release(pid)


def _proc_state(pid: int) -> tuple[str, int] | None:
    """(State letter, TracerPid) of ``pid``; None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    state, tracer = "?", 0
    for line in text.splitlines():
        if line.startswith("State:"):
            state = line.split()[1]
        elif line.startswith("TracerPid:"):
            tracer = int(line.split()[1])
    return state, tracer


def _release(pid: int) -> None:
    """Wait (briefly) for the kernel to drop the tracer, then resume ``pid``
    if the detach left it stopped (a stop signal caught mid-detach)."""
    deadline = time.monotonic() + DETACH_TIMEOUT_S
    while True:
        status = _proc_state(pid)
        if status is None or (status[1] == 0 and status[0] not in "Tt") or time.monotonic() > deadline:
            break
        if status[1] == 0:  # not traced, but stopped: only we could have left it so
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.02)


class FsyncErrors:
    """The injector for one run: one strace at a time."""

    def __init__(self) -> None:
        self._current: tuple[_Tracer, int] | None = None
        atexit.register(self.release)

    def inject(self, pid: int, fault: FsyncFault) -> int:
        """Fail ``pid``'s fsyncs as ``fault`` says, then detach. Returns how
        many calls failed. Raises InjectionError if strace cannot attach."""
        tracer = _Tracer(strace_command(pid, fault.every))
        self._current = (tracer, pid)
        try:
            tracer.wait_attached(ATTACH_TIMEOUT_S)
            time.sleep(fault.hold_s)  # the fault itself: the broker's syncs fail
        finally:
            self.release()
        return tracer.injected

    def release(self) -> None:
        """Detach the strace in place, if any. Idempotent, never raises."""
        current, self._current = self._current, None
        if current is not None:
            current[0].detach(current[1])

    def close(self) -> None:
        self.release()
        try:
            atexit.unregister(self.release)
        except Exception:  # noqa: BLE001 - at exit, nothing left to do
            pass
