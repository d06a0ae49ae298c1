"""The product's command and the developer tools beside it: ``magnetar``
loads no tool (the chaos tool is its own command, ``magnetar-chaos``)."""
from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from magnetar.cli import app
from magnetar_chaos.cli import chaos_app

TOOLS = ("magnetar_chaos", "magnetar_harness", "magnetar.chaos")


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_the_cli_loads_no_developer_tool():
    out = _python("import sys, magnetar.cli\n"
                  f"print(sorted(m for m in sys.modules if m.startswith({TOOLS!r})))")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_magnetar_has_no_chaos_command_and_the_tool_has_its_own():
    assert CliRunner().invoke(app, ["chaos", "run", "--help"]).exit_code == 2
    result = CliRunner().invoke(chaos_app, ["run", "--help"], prog_name="magnetar-chaos", terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "magnetar-chaos run" in result.output and "--topology" in result.output

