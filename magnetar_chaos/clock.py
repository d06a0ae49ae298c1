"""The ``clock-jump`` fault: a broker's wall clock (CLOCK_REALTIME) steps
forward or backward, as an NTP step, a VM resumed from a snapshot or an
operator's ``date -s`` does, while its monotonic clock runs on.

Mechanism: libfaketime (Debian package ``libfaketime``). When the fault is
asked for, every broker of the run starts with

- ``LD_PRELOAD=<libfaketime.so.1>``;
- ``FAKETIME_TIMESTAMP_FILE=<its own file>``, holding an offset such as
  ``+0`` or ``-600`` (seconds, relative to the true time);
- ``FAKETIME_DONT_FAKE_MONOTONIC=1``: only CLOCK_REALTIME moves, like a real
  step (timers, sessions and timeouts use the monotonic clock);
- ``FAKETIME_CACHE_DURATION=1``: the file is read again once a second has
  passed (libfaketime compares whole seconds, so a jump lands up to 2 s
  after the file changes). ``FAKETIME_NO_CACHE=1`` (read at every reading)
  made a standalone run 9 times slower (3,426 operations in 20 s against
  30,043 without the preload; 20,985 with this cache).

The fault writes a new offset into one broker's file (:class:`ClockFiles`,
atomically: a reader never sees an empty file, which would read as "no
offset" and step the clock back for one reading). What a fault does is
drawn by :func:`draw_clock_jump`: forward +90 s (past the 60 s pid lease),
+10 min, +2 h, +8 days (past the 7-day pid expiry), or backward -30 s,
-10 min; then half the time the clock is
stepped back to the true time after 3-6 s (a wrong clock that NTP
corrects: two steps, one each way; at least 3 s so that the broker, which
sees a change up to 2 s late, lives a second or more on the wrong clock), else left where it is until that
broker's next clock jump (a step stays: the broker keeps running, and
restarting, on it; in a cluster its clock disagrees with the others').
Offsets are always drawn relative to the true time, so they never pile up.

libfaketime 0.9.10 bug worked around: with ``FAKETIME_DONT_FAKE_MONOTONIC``
its ``clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`` passes the kernel a
wrong deadline and fails with EINVAL, which is what Python 3.11's
``time.sleep`` calls (libfaketime issue 426). The brokers run under
:mod:`.clock_boot`, which gives ``time.sleep`` a ``select()`` timeout
instead (same contract), so no broker code path can fail on it.

Failure modes: :func:`unavailable_reason` says why the fault cannot run
(libfaketime missing and not root to install it, an install that failed,
or a preloaded process that does not see the jump): the run is refused up
front, one line, exit code 2.
"""
from __future__ import annotations

import fcntl
import glob
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

#: Where Debian and a ``make install`` put it.
LIBRARY_GLOBS = ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
                 "/usr/local/lib/faketime/libfaketime.so.1")
APT_PACKAGE = "libfaketime"
#: Held while one process installs the package: test workers import this at
#: the same time, and apt's own lock would refuse all of them but one.
INSTALL_LOCK = Path(tempfile.gettempdir()) / "magnetar-apt.lock"
#: Forward past the 60 s pid lease, by minutes, hours, and past the 7-day
#: pid expiry (``pid_expiry_s``: a pid unused that long by the wall clock,
#: its lease run out, is dropped); backward a little and a lot.
OFFSETS_S = (90, 600, 7200, 8 * 24 * 3600, -30, -600)
PROBE_OFFSET_S = 3600


class ClockJumpUnavailable(ValueError):
    """The clock-jump fault cannot run here (no libfaketime, or it does not work)."""


@dataclass(frozen=True)
class ClockJump:
    """One fault: the clock steps to ``offset_s`` from the true time; after
    ``hold_s`` it steps back to the true time, or stays (``hold_s`` None)."""
    offset_s: int
    hold_s: float | None

    def describe(self) -> str:
        held = "left" if self.hold_s is None else f"held {self.hold_s:.1f} s, stepped back"
        return f"{format_offset(self.offset_s)} s, {held}"


def draw_clock_jump(rng: random.Random) -> ClockJump:
    """The next jump from the nemesis's random stream (see the module docstring)."""
    offset = rng.choice(OFFSETS_S)
    hold = rng.uniform(3.0, 6.0) if rng.random() < 0.5 else None
    return ClockJump(offset, hold)


def format_offset(offset_s: int) -> str:
    """The file's text for an offset: libfaketime wants the sign (``+0``, ``-30``)."""
    return f"{int(offset_s):+d}"


def find_library() -> str | None:
    """The path of libfaketime.so.1, or None."""
    for pattern in LIBRARY_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def ensure_library() -> str | None:
    """libfaketime's path, installing the package with apt-get if missing and
    root (as ``bench`` does for nats-server); None if still unavailable.

    Processes that call it at once (two test workers collecting the same
    module on a fresh machine) install it once: the others wait on
    ``INSTALL_LOCK`` and find it installed. Before, the second one's
    apt-get met dpkg's lock and failed, and its tests skipped. apt-get also
    waits for dpkg's lock (another installer on the machine) up to 5 min."""
    path = find_library()
    if path is not None or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return path
    with open(INSTALL_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        path = find_library()
        if path is not None:
            return path
        print(f"installing {APT_PACKAGE}: apt-get install -y {APT_PACKAGE}", file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
        install = ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "-qq", APT_PACKAGE]
        if subprocess.run(install, **quiet).returncode != 0:
            subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "update", "-qq"], **quiet)  # stale lists
            subprocess.run(install, **quiet)
        return find_library()


def boot_args(args: list[str]) -> list[str]:
    """A broker command line (``... python -m magnetar.cli ...``, perhaps
    after ``ip netns exec NS``) run through :mod:`.clock_boot` instead."""
    for i in range(len(args) - 1):
        if args[i] == "-m" and args[i + 1] == "magnetar.cli":
            return [*args[:i], "-m", "magnetar_chaos.clock_boot", *args[i:]]
    raise ValueError(f"not a magnetar command line: {args}")


def preload_env(library: str, clock_file: Path) -> dict[str, str]:
    """The environment a broker runs with so that ``clock_file`` sets its wall clock."""
    return {"LD_PRELOAD": library, "FAKETIME_TIMESTAMP_FILE": str(clock_file),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_CACHE_DURATION": "1"}


def write_offset(clock_file: Path, offset_s: int) -> None:
    """Set the offset atomically (a new file renamed over the old one)."""
    tmp = clock_file.with_name(clock_file.name + ".tmp")
    tmp.write_text(format_offset(offset_s) + "\n")
    os.replace(tmp, clock_file)


def read_offset(clock_file: Path) -> int:
    """The offset a file holds (0 if it holds nothing)."""
    text = clock_file.read_text().strip()
    return int(text) if text else 0


#: Prints the wall clock and how far the monotonic clock ran during a 0.1 s sleep.
_PROBE = ("import time\n"
          "m = time.monotonic()\n"
          "time.sleep(0.1)\n"
          "print(round(time.time()), round(time.monotonic() - m, 1))\n")


def probe(library: str) -> str | None:
    """None if a Python process under ``library`` reads the offset from its
    file and keeps its monotonic clock; else why not. (It also sleeps,
    through :mod:`.clock_boot`.) Leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="magnetar-clock-") as directory:
        clock_file = Path(directory) / "probe.faketime"
        write_offset(clock_file, PROBE_OFFSET_S)
        out = subprocess.run([sys.executable, "-m", "magnetar_chaos.clock_boot", "-c", _PROBE],
                             env=dict(os.environ, **preload_env(library, clock_file)),
                             capture_output=True, text=True, timeout=30)
    fields = out.stdout.split()
    if out.returncode != 0 or len(fields) != 2:
        return f"a process under {library} failed: {(out.stderr or out.stdout).strip()[-300:]}"
    if abs(int(fields[0]) - time.time() - PROBE_OFFSET_S) > 5:
        return f"a process under {library} did not see its clock moved by {PROBE_OFFSET_S} s"
    if not 0.05 < float(fields[1]) < 5:
        return f"a process under {library} has a monotonic clock that moved {fields[1]} s in a 0.1 s sleep"
    return None


def unavailable_reason() -> tuple[str | None, str | None]:
    """(library path, None) if the fault can run, else (None, why not)."""
    library = ensure_library()
    if library is None:
        if os.geteuid() != 0:
            return None, (f"the clock-jump fault runs the brokers under libfaketime, which is not installed: "
                          f"run as root (the harness installs it) or apt-get install -y {APT_PACKAGE}, "
                          f"or leave clock-jump out of --faults")
        return None, (f"the clock-jump fault needs libfaketime and apt-get install -y {APT_PACKAGE} failed: "
                      f"install it or leave clock-jump out of --faults")
    reason = probe(library)
    if reason is not None:
        return None, f"the clock-jump fault cannot move a clock here ({reason}): leave clock-jump out of --faults"
    return library, None


class ClockFiles:
    """One clock file per broker of a run, each at ``+0`` to begin with."""

    def __init__(self, library: str, directory: Path) -> None:
        self.library = library
        self.directory = directory

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.faketime"

    def env(self, name: str) -> dict[str, str]:
        """The environment of broker ``name``; creates its file at +0 if new."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.path(name).exists():
            write_offset(self.path(name), 0)
        return preload_env(self.library, self.path(name))

    def set(self, name: str, offset_s: int) -> None:
        write_offset(self.path(name), offset_s)

    def attach(self, broker, name: str) -> None:
        """Make ``broker`` (a :class:`magnetar_harness.broker.BrokerProcess`) start under its
        clock file, and clear the preload's leftovers of each run that ends."""
        broker.env = self.env(name)
        broker.wrap = boot_args
        broker.on_exit = forget_process

    def jump(self, name: str, jump: ClockJump) -> str:
        """Do ``jump`` to broker ``name``'s clock: step, and if it is held,
        wait and step back to the true time. Returns what happened."""
        before = self.offset(name)
        self.set(name, jump.offset_s)
        if jump.hold_s is not None:
            try:
                time.sleep(jump.hold_s)  # the wrong clock, until "NTP" corrects it
            finally:
                self.set(name, 0)
        return f"clock-jump {name}: {format_offset(before)} -> {jump.describe()}"

    def offset(self, name: str) -> int:
        return read_offset(self.path(name))


def forget_process(pid: int, shm: Path = Path("/dev/shm")) -> None:
    """Remove the shared memory and semaphore libfaketime made for ``pid``:
    a process killed by SIGKILL cannot, and a later process given the same
    pid would fail to start under the preload ("shm_open failed: File
    exists", libfaketime's README)."""
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        (shm / name).unlink(missing_ok=True)


def make_clock_files(faults, out_dir: Path) -> ClockFiles | None:
    """The run's clock files if ``clock-jump`` is asked for; raises
    ClockJumpUnavailable (a ValueError: nothing started yet) if it cannot run."""
    if "clock-jump" not in faults:
        return None
    library, reason = unavailable_reason()
    if reason is not None:
        raise ClockJumpUnavailable(reason)
    assert library is not None
    return ClockFiles(library, out_dir / "clock")
