"""Every ``magnetar admin`` command is run against a live broker by a test.

A command nobody runs can break unnoticed (``brokers list`` raised a
TypeError for months): this walks the typer app and looks for each
``"area", "command"`` pair in the admin CLI integration tests.
"""
from __future__ import annotations

from pathlib import Path

import typer

from magnetar.cli import app

TESTS = Path(__file__).resolve().parents[2] / "integration"


def admin_commands() -> list[tuple[str, str]]:
    admin = typer.main.get_command(app).commands["admin"]
    return [(area, name) for area, group in admin.commands.items() for name in group.commands]


def test_every_admin_command_is_run_by_an_integration_test():
    sources = "".join(p.read_text() for p in TESTS.rglob("test_admin_cli*.py"))
    commands = admin_commands()
    assert len(commands) > 50
    missing = [f"{area} {name}" for area, name in commands if f'"{area}", "{name}"' not in sources]
    assert not missing, f"admin commands no test runs: {missing}"
