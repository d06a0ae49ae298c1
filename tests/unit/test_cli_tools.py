"""The product's command and the developer tools beside it: ``magnetar`` does
not load the fault-injection tool until ``magnetar chaos`` runs, and says in
one line how to install it when it is absent."""
from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from magnetar.cli import CHAOS_MISSING, app

TOOLS = ("magnetar_chaos", "magnetar_harness", "magnetar.chaos")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_the_cli_loads_no_developer_tool():
    out = _python("import sys, magnetar.cli\n"
                  f"print(sorted(m for m in sys.modules if m.startswith({TOOLS!r})))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_magnetar_chaos_hands_its_arguments_to_the_tool():
    result = CliRunner().invoke(app, ["chaos", "run", "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "magnetar chaos run" in result.output and "--topology" in result.output


def test_magnetar_chaos_says_how_to_install_the_tool_when_absent():
    # A finder in front of the others makes the import fail as if the package were not installed.
    out = _python("import sys\n"
                  "class Absent:\n"
                  "    def find_spec(self, name, path=None, target=None):\n"
                  "        if name == 'magnetar_chaos':\n"
                  "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
                  "sys.meta_path.insert(0, Absent())\n"
                  "sys.argv = ['magnetar', 'chaos', 'run', '--duration', '10']\n"
                  "from magnetar.cli import main\nmain()")
    assert out.returncode == 2
    assert out.stderr.strip() == CHAOS_MISSING
    assert "Traceback" not in out.stderr
