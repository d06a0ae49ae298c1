"""The clock-jump fault's pieces: the offset file, the draw, the jump (step,
hold, step back), the command line through the boot shim, the refusal; and,
where libfaketime is installed, a real process under it seeing its wall
clock jump while its monotonic clock and uvloop timers run on."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time

import pytest

from magnetar_chaos import clock, clock_boot


def test_the_offset_file_holds_a_signed_number_of_seconds(tmp_path):
    path = tmp_path / "b.faketime"
    for offset, text in ((0, "+0"), (90, "+90"), (-600, "-600")):
        clock.write_offset(path, offset)
        assert path.read_text() == text + "\n"  # libfaketime's relative-offset syntax
        assert clock.read_offset(path) == offset
    assert [p.name for p in tmp_path.iterdir()] == ["b.faketime"]  # the temporary file was renamed over it


def test_the_draw_jumps_both_ways_past_the_pid_lease_and_holds_or_leaves():
    rng = random.Random(3)
    jumps = [clock.draw_clock_jump(rng) for _ in range(300)]
    assert {j.offset_s for j in jumps} == set(clock.OFFSETS_S)
    assert any(j.offset_s > 60 for j in jumps) and any(j.offset_s < 0 for j in jumps)
    held = [j.hold_s for j in jumps if j.hold_s is not None]
    assert held and all(3.0 <= h <= 6.0 for h in held)
    assert any(j.hold_s is None for j in jumps)
    assert clock.ClockJump(90, 2.25).describe() == "+90 s, held 2.2 s, stepped back"
    assert clock.ClockJump(-600, None).describe() == "-600 s, left"


def test_a_held_jump_steps_back_to_the_true_time_and_a_left_one_stays(tmp_path, monkeypatch):
    files = clock.ClockFiles("/lib/libfaketime.so.1", tmp_path)
    env = files.env("broker-1")
    assert env == {"LD_PRELOAD": "/lib/libfaketime.so.1", "FAKETIME_TIMESTAMP_FILE": str(files.path("broker-1")),
                   "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_CACHE_DURATION": "1"}
    assert files.offset("broker-1") == 0
    seen = []
    monkeypatch.setattr(clock.time, "sleep", lambda s: seen.append((s, files.offset("broker-1"))))
    assert files.jump("broker-1", clock.ClockJump(7200, 3.0)) == "clock-jump broker-1: +0 -> +7200 s, held 3.0 s, stepped back"
    assert seen == [(3.0, 7200)] and files.offset("broker-1") == 0
    assert files.jump("broker-1", clock.ClockJump(-30, None)) == "clock-jump broker-1: +0 -> -30 s, left"
    assert files.offset("broker-1") == -30
    files.env("broker-1")  # a restart keeps the stepped clock
    assert files.offset("broker-1") == -30
    # The next jump is drawn from the true time, not added to the last.
    files.jump("broker-1", clock.ClockJump(90, None))
    assert files.offset("broker-1") == 90


def test_a_held_jump_interrupted_still_steps_back(tmp_path, monkeypatch):
    files = clock.ClockFiles("/lib/libfaketime.so.1", tmp_path)
    files.env("broker")

    def interrupted(_):
        raise KeyboardInterrupt

    monkeypatch.setattr(clock.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files.jump("broker", clock.ClockJump(600, 2.0))
    assert files.offset("broker") == 0


def test_broker_command_lines_go_through_the_boot_shim():
    plain = [sys.executable, "-m", "magnetar.cli", "standalone", "--port", "1"]
    assert clock.boot_args(plain) == [sys.executable, "-m", "magnetar_chaos.clock_boot", "-m", "magnetar.cli",
                                      "standalone", "--port", "1"]
    in_ns = ["ip", "netns", "exec", "ns0", *plain]
    assert clock.boot_args(in_ns)[:7] == ["ip", "netns", "exec", "ns0", sys.executable, "-m",
                                          "magnetar_chaos.clock_boot"]
    with pytest.raises(ValueError):
        clock.boot_args(["etcd", "--name", "x"])


def test_the_shims_sleep_keeps_the_contract():
    start = time.monotonic()
    clock_boot._sleep(0.05)
    assert time.monotonic() - start >= 0.05
    clock_boot._sleep(0)
    with pytest.raises(ValueError):
        clock_boot._sleep(-1)


def test_without_libfaketime_and_without_root_the_fault_is_refused_in_one_line(monkeypatch, tmp_path):
    monkeypatch.setattr(clock, "find_library", lambda: None)
    monkeypatch.setattr(clock.os, "geteuid", lambda: 1000)
    library, reason = clock.unavailable_reason()
    assert library is None and "libfaketime" in reason and "leave clock-jump out of --faults" in reason
    assert "\n" not in reason
    with pytest.raises(clock.ClockJumpUnavailable):
        clock.make_clock_files(["kill", "clock-jump"], tmp_path)
    assert clock.make_clock_files(["kill"], tmp_path) is None
    assert list(tmp_path.iterdir()) == []  # refused with nothing written


# Installed here when missing, as root (as the harness does), so a fresh CI
# machine runs these: they skip only where it cannot be installed.
LIBRARY = clock.ensure_library()
needs_libfaketime = pytest.mark.skipif(
    LIBRARY is None, reason="libfaketime is not installed and cannot be here (apt-get install -y libfaketime as root)")

_CHILD = textwrap.dedent("""
    import asyncio, os, sys, time
    import uvloop

    path = sys.argv[1]

    def step(offset):
        with open(path + ".tmp", "w") as f:
            f.write(offset + "\\n")
        os.replace(path + ".tmp", path)

    async def main():
        loop = asyncio.get_running_loop()
        base = time.time() - time.monotonic()
        out = []
        for offset in ("+90", "-600", "+0"):
            step(offset)
            m = time.monotonic()
            await asyncio.sleep(0.2)                 # a uvloop timer: monotonic
            fired = loop.create_future()
            loop.call_later(0.1, fired.set_result, None)
            await fired
            time.sleep(0.05)                          # the shim's sleep
            out.append((round(time.time() - time.monotonic() - base), round(time.monotonic() - m, 2)))
        print(out)

    uvloop.run(main())
""")


@needs_libfaketime
def test_under_libfaketime_only_the_wall_clock_jumps(tmp_path):
    path = tmp_path / "c.faketime"
    clock.write_offset(path, 0)
    out = subprocess.run([sys.executable, "-m", "magnetar_chaos.clock_boot", "-c", _CHILD, str(path)],
                         # Read at every reading here, so that each step lands at once (the
                         # runs' 1 s cache would land it up to 2 s later).
                         env=dict(os.environ, **clock.preload_env(LIBRARY, path), FAKETIME_NO_CACHE="1"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    steps = eval(out.stdout)  # [(wall - monotonic moved by, monotonic seconds the timers took)]
    assert [wall for wall, _ in steps] == [90, -600, 0]
    assert all(0.3 <= took < 3.0 for _, took in steps)  # 0.35 s of timers: the monotonic clock ran on


@needs_libfaketime
def test_the_probe_passes_where_libfaketime_works():
    assert clock.probe(LIBRARY) is None


def test_the_cli_refuses_the_fault_in_one_line_with_exit_code_2_and_writes_nothing(monkeypatch, tmp_path):
    import signal

    from typer.testing import CliRunner

    from magnetar_chaos.cli import chaos_app

    monkeypatch.setattr(clock, "find_library", lambda: None)
    monkeypatch.setattr(clock.os, "geteuid", lambda: 1000)
    previous = signal.getsignal(signal.SIGTERM)  # the command installs its own
    try:
        result = CliRunner().invoke(chaos_app, ["run", "--duration", "5", "--faults", "kill,clock-jump",
                                                "--out", str(tmp_path / "out")])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "libfaketime" in result.output
    assert not (tmp_path / "out").exists()


def test_a_killed_brokers_preload_leftovers_are_removed(tmp_path):
    for name in ("faketime_shm_41", "sem.faketime_sem_41", "faketime_shm_42"):
        (tmp_path / name).write_text("")
    clock.forget_process(41, tmp_path)
    clock.forget_process(43, tmp_path)  # nothing there: no error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["faketime_shm_42"]


def test_workers_that_ensure_the_library_at_once_install_it_once(tmp_path, monkeypatch):
    """Two test workers collecting this module on a fresh machine: one
    installs, the other waits and finds it (before, its apt-get met dpkg's
    lock, failed, and its tests skipped). apt-get here is a stand-in that
    takes a second, counts its runs, and fails while another one runs."""
    import threading

    library = tmp_path / "lib" / "libfaketime.so.1"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "apt-get"
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo run >> {tmp_path}/runs
        mkdir {tmp_path}/dpkg-lock 2>/dev/null || exit 100
        sleep 1
        mkdir -p {library.parent} && touch {library}
        rmdir {tmp_path}/dpkg-lock
        """))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(clock, "LIBRARY_GLOBS", (str(library),))
    monkeypatch.setattr(clock, "INSTALL_LOCK", tmp_path / "install.lock")
    monkeypatch.setattr(clock.os, "geteuid", lambda: 0)
    found = []
    workers = [threading.Thread(target=lambda: found.append(clock.ensure_library())) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert found == [str(library)] * 2
    assert (tmp_path / "runs").read_text() == "run\n"  # installed once
