"""The pool of segment files is sized from the process's open-file limit by
default (``max_open_ledger_files = 0``): the soft limit is raised to the
hard one, and the pool is half of it; a limit too low for many written
topics is said in one line, never a crash. Each case runs in a child
process with its own limits (``setrlimit`` there, as a service manager
would set them)."""
from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from magnetar.storage import StorageConfig

PROBE = """
import json, resource
from magnetar.storage.file.handles import capacity_within_limit
capacity, warning = capacity_within_limit({wanted})
print(json.dumps({{"capacity": capacity, "warning": warning,
                  "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}}))
"""


def probe(soft: int, hard: int, wanted: int = 0) -> dict:
    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run([sys.executable, "-c", PROBE.format(wanted=wanted)], preexec_fn=limits,
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _hard_at_least(n: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < n:
        pytest.fail(f"this test needs a hard open-file limit of {n} or more (ulimit -Hn is {hard})")


def test_the_default_pool_is_half_the_open_file_limit_raised_to_the_hard_one():
    assert StorageConfig().max_open_ledger_files == 0
    _hard_at_least(4096)
    got = probe(1024, 4096)
    assert got == {"capacity": 2048, "warning": None, "soft": 4096}


def test_a_low_limit_that_cannot_be_raised_gives_a_small_pool_and_one_line_saying_so():
    got = probe(256, 256)
    assert got["capacity"] == 128 and got["soft"] == 256
    assert got["warning"].startswith("the open-file limit (ulimit -n) is 256: keeping at most 128 segment files")
    assert "\n" not in got["warning"]


def test_a_pool_sized_by_hand_still_raises_the_soft_limit_only_as_far_as_it_needs():
    _hard_at_least(4096)
    assert probe(1024, 4096, wanted=2000) == {"capacity": 2000, "warning": None, "soft": 2256}


def test_a_negative_pool_size_is_a_clear_error():
    with pytest.raises(ValueError, match="max_open_ledger_files must be >= 0"):
        StorageConfig(max_open_ledger_files=-1)
