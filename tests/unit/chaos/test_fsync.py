"""The fsync-error fault's pieces that need no ptrace: the strace line, the
draw, and the refusal (one line, exit code 2, nothing written) where the
fault cannot run."""
from __future__ import annotations

import os
import random
import subprocess
import sys

from magnetar_chaos import fsync


def test_the_strace_line_fails_both_sync_calls_of_every_thread_with_eio():
    args = fsync.strace_command(1234, every=1)
    assert args[:4] == ["strace", "-f", "-p", "1234"]  # -f with -p: every thread of the broker
    assert "inject=fdatasync:error=EIO" in args and "inject=fsync:error=EIO" in args
    some = fsync.strace_command(1234, every=3)
    assert "inject=fdatasync:error=EIO:when=1+3" in some and "inject=fsync:error=EIO:when=1+3" in some


def test_the_draw_holds_one_to_three_seconds_failing_every_call_or_one_in_two_or_three():
    rng = random.Random(5)
    faults = [fsync.draw_fsync_fault(rng) for _ in range(200)]
    assert all(1.0 <= f.hold_s <= 3.0 for f in faults)
    assert {f.every for f in faults} == {1, 2, 3}
    assert fsync.FsyncFault(1.5, 2).describe() == "1 in 2 fsync for 1.5 s"


def test_ptrace_refused_by_yama_without_the_capability_is_a_reason(monkeypatch):
    monkeypatch.setattr(fsync.shutil, "which", lambda name: "/usr/bin/strace")
    monkeypatch.setattr(fsync, "_ptrace_scope", lambda: 1)
    monkeypatch.setattr(fsync, "_has_cap_sys_ptrace", lambda: False)
    reason = fsync.unavailable_reason()
    assert reason is not None and "CAP_SYS_PTRACE" in reason and "ptrace_scope" in reason
    monkeypatch.setattr(fsync, "_ptrace_scope", lambda: 3)  # 3: no one may attach
    monkeypatch.setattr(fsync, "_has_cap_sys_ptrace", lambda: True)
    assert fsync.unavailable_reason() is not None


def test_without_strace_the_run_is_refused_in_one_line_with_exit_code_2(tmp_path):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "magnetar_chaos", "run", "--duration", "5",
                             "--faults", "kill,fsync-error", "--out", str(out)],
                            capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, PATH=str(tmp_path)))  # no strace on this PATH
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout.strip().splitlines() == [
        "the fsync-error fault needs strace, which is not installed: install it or leave fsync-error out of --faults"]
    assert not out.exists()
