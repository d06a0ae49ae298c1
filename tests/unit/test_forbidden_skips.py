"""CI forbids skips (``.ci/run`` sets ``MAGNETAR_FORBID_SKIPS=1``): a test
that would skip there, because a tool is missing or the machine is not root,
fails and names its reason instead of hiding a broken install."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = '''
import pytest

@pytest.mark.skipif(True, reason="etcd is not installed")
def test_marked():
    pass

def test_dynamic():
    pytest.skip("not root")

@pytest.mark.xfail(reason="a known bug")
def test_expected_failure():
    assert False
'''


def run_probe(tmp_path: Path, forbid: bool) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "MAGNETAR_FORBID_SKIPS"}
    if forbid:
        env["MAGNETAR_FORBID_SKIPS"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
         "-p", "tests.conftest", "--rootdir", str(tmp_path), "-o", "addopts=", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout


def test_skips_fail_with_their_reason_where_forbidden(tmp_path):
    out = run_probe(tmp_path, forbid=True)
    assert "etcd is not installed" in out and "not root" in out, out
    assert "skipped" not in out.splitlines()[-1], out
    assert "1 xfailed" in out, out


def test_skips_stay_skips_elsewhere(tmp_path):
    out = run_probe(tmp_path, forbid=False)
    assert "2 skipped" in out.splitlines()[-1], out
