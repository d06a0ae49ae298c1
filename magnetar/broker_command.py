"""What ``magnetar standalone`` and ``magnetar broker`` share: the config
loaded, and the broker run with its admin API.

Failure modes, each one line on stderr, never a traceback: a bad config
(file, option or value) exits 2 (``configuration error: ...``); a broker
that cannot start (a busy port, an unreachable store) exits 1
(``cannot start: ...``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from magnetar.broker.config import BrokerConfig
    from magnetar.broker.server.server import ExtensionFactory

err = Console(stderr=True, soft_wrap=True)  # one line also when piped (rich wraps at 80 there)


def load_or_exit(path: str | None, overrides: dict) -> "BrokerConfig":
    """The config from the TOML file at ``path`` (None: defaults) and the command's options."""
    from magnetar.broker.config import ConfigError, load_config

    try:
        return load_config(path, overrides)
    except ConfigError as exc:
        err.print(f"[red]configuration error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def run_or_exit(config: "BrokerConfig", extensions: Sequence["ExtensionFactory"] = ()) -> None:
    """Run the broker with its admin HTTP API and ``extensions`` until SIGINT or SIGTERM."""
    from magnetar.admin.listener import AdminListener
    from magnetar.broker.server.server import StartupError, run

    try:
        run(config, extensions, admin=AdminListener())
    except StartupError as exc:
        err.print(f"[red]cannot start:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
