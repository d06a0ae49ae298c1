"""The shell blocks of README.md and docs/*.md run as written.

A block fenced as ```sh is a promise: pasted into a shell at the project's
root, against a fresh standalone broker on the default ports, it works. This
test holds the docs to it: each file's ``sh`` blocks run in order, in one
``bash -e`` session, against a broker started here. The only difference from
a reader's shell is where the broker listens, given the way a reader could
give it too: ``$MAGNETAR_ADMIN_URL`` and ``$MAGNETAR_SERVICE_URL``.

Blocks that start servers, need a cluster, TLS files or another machine are
fenced ```shell (or ```text, ```toml for output and settings) and are not run.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import start_broker, stop_broker

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\S*)\s*$")


def sh_blocks(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of each ```sh block of ``path``."""
    blocks, lines = [], path.read_text().split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        if m.group(1) == "sh":
            blocks.append((i + 1, "\n".join(lines[i + 1:end])))
        i = end + 1
    return blocks


RUNNABLE = [p for p in DOCS if sh_blocks(p)]


def test_the_docs_have_runnable_blocks():
    assert {p.name for p in RUNNABLE} >= {"README.md", "admin.md", "single-writer.md", "features.md"}


@pytest.mark.parametrize("doc", RUNNABLE, ids=lambda p: p.name)
def test_every_sh_block_runs_as_written(doc, tmp_path):
    broker = start_broker(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    (work / ".venv").symlink_to(Path(sys.executable).parent.parent)  # `.venv/bin/magnetar` as in the docs
    env = dict(os.environ, MAGNETAR_ADMIN_URL=broker.admin_url, MAGNETAR_SERVICE_URL=broker.service_url,
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    try:
        for line, text in sh_blocks(doc):
            # Each command echoed (-x) so a failure names the line that failed.
            result = subprocess.run(["bash", "-e", "-x", "-o", "pipefail", "-c", text], cwd=work, env=env,
                                    capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, (
                f"{doc.name}:{line}: block failed (exit {result.returncode})\n"
                f"--- stderr\n{result.stderr[-3000:]}\n--- stdout\n{result.stdout[-2000:]}")
    finally:
        stop_broker(broker)
