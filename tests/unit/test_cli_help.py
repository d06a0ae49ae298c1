"""Every command's --help reads as a Pulsar user expects: flags without a type label."""
from __future__ import annotations

import typer
from typer.testing import CliRunner

from magnetar.cli import app
from magnetar_chaos.cli import chaos_app


def _commands(command, path: tuple[str, ...] = ()):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, path + (name,))


def test_no_help_page_labels_a_flag_with_a_type():
    runner = CliRunner()
    # `magnetar`, and the tool beside the product with a command of its own (`magnetar-chaos`).
    paths = [(app, "magnetar", path) for path in _commands(typer.main.get_command(app))]
    paths += [(chaos_app, "magnetar-chaos", path) for path in _commands(typer.main.get_command(chaos_app))]
    assert len(paths) > 50  # the walk reached the admin areas' commands
    labelled = []
    for command, prog, path in paths:
        result = runner.invoke(command, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (prog, path, result.output)
        if "<bool>" in result.output:
            labelled.append(" ".join((prog, *path)))
    assert not labelled, f"flags shown as <bool> in: {labelled[:5]}"
