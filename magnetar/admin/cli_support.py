"""What every ``magnetar admin`` command shares: the settings the root
options make, calling the admin client with errors turned into exit codes
(1: refused or unreachable, 2: bad arguments), parsing durations and sizes,
and printing answers as tables or raw JSON.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from magnetar.security.tls import TlsSetupError

from .client import AdminApiError, AdminClient, AdminUnreachable

err = Console(stderr=True, soft_wrap=True)


@dataclass
class Settings:
    url: str
    json: bool
    #: Keyword arguments of AdminClient: credentials and TLS files.
    client_options: dict = field(default_factory=dict)


# -- parsing -------------------------------------------------------------------------
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_BYTES = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def usage(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(2)


def parse_duration(text: str, default_unit: str = "s") -> int:
    """``"10m"`` -> 600 seconds; ``"-1"`` -> -1; a bare number uses ``default_unit``."""
    text = text.strip().lower()
    if text == "-1":
        return -1
    match = re.fullmatch(r"(\d+)([smhdw]?)", text)
    if not match:
        raise usage(f"invalid duration {text!r}: use a number with s, m, h, d or w (or -1)")
    return int(match.group(1)) * _SECONDS[match.group(2) or default_unit]


def parse_size(text: str) -> int:
    """``"10M"`` -> bytes; ``"-1"`` -> -1; a bare number is bytes."""
    text = text.strip().lower()
    if text == "-1":
        return -1
    match = re.fullmatch(r"(\d+)([kmgt]?)", text)
    if not match:
        raise usage(f"invalid size {text!r}: use a number with k, M, G or T (or -1)")
    return int(match.group(1)) * _BYTES[match.group(2)]


# -- calling and printing ----------------------------------------------------------
def out() -> Console:
    console = Console()
    # Tables must not wrap names when piped (scripts, tests read them).
    return console if console.is_terminal else Console(width=250)


def call(ctx: typer.Context, call: Callable[[AdminClient], Any], render: Callable[[Any], None] | None = None,
          done: str | None = None) -> None:
    settings: Settings = ctx.obj
    try:
        result = call(AdminClient(settings.url, **settings.client_options))
    except TlsSetupError as exc:
        raise usage(str(exc))
    except AdminApiError as exc:
        err.print(f"[red]error:[/red] {exc.status} {escape(exc.reason)}")
        raise typer.Exit(1)
    except AdminUnreachable as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1)
    except ValueError as exc:  # a malformed name or id given on the command line
        raise usage(str(exc))
    if settings.json:
        if result is not None:
            typer.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    if render is not None:
        render(result)
    elif done is not None:
        out().print(escape(done))


def show_list(header: str) -> Callable[[Any], None]:
    def render(items: list) -> None:
        table = Table(header)
        for item in items:
            table.add_row(escape(str(item)))
        out().print(table)

    return render


def cell(value: Any) -> str:
    return escape(value if isinstance(value, str) else json.dumps(value, sort_keys=True))


def show_fields(doc: Any) -> None:
    """A document as a two-column table; nested values as compact JSON."""
    if not isinstance(doc, dict):
        out().print(cell(doc))
        return
    table = Table("Field", "Value")
    for key, value in doc.items():
        table.add_row(escape(str(key)), cell(value))
    out().print(table)


def show_stats(doc: dict) -> None:
    """Topic stats: scalar fields, then one row per subscription and publisher."""
    show_fields({k: v for k, v in doc.items() if k not in ("subscriptions", "publishers")})
    subs = doc.get("subscriptions") or {}
    if subs:
        table = Table("Subscription", "Type", "Backlog", "Consumers")
        for name, sub in subs.items():
            table.add_row(escape(name), cell(sub.get("type")), cell(sub.get("msgBacklog")),
                          str(len(sub.get("consumers", []))))
        out().print(table)
    pubs = doc.get("publishers") or []
    if pubs:
        table = Table("Producer", "Access mode", "Messages in")
        for pub in pubs:
            table.add_row(cell(pub.get("producerName")), cell(pub.get("accessMode")), cell(pub.get("msgInCounter")))
        out().print(table)
