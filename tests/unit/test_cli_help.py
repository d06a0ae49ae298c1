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
    root = typer.main.get_command(app)
    runner = CliRunner()
    # `magnetar chaos` hands its arguments to the tool beside the product: walk the tool's commands too.
    paths = list(_commands(root)) + [("chaos", *path) for path in _commands(typer.main.get_command(chaos_app))]
    assert len(paths) > 50  # the walk reached the admin areas' commands
    labelled = []
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        if "<bool>" in result.output:
            labelled.append(" ".join(path))
    assert not labelled, f"flags shown as <bool> in: {labelled[:5]}"
