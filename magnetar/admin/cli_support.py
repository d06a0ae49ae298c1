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


def rate(value: Any) -> str:
    """A per-second rate as a cell: two decimals (``-`` when absent)."""
    return f"{value:.2f}" if isinstance(value, (int, float)) else "-"


def flatten(doc: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """A nested document as ``(dotted.path, scalar)`` rows, in its order.

    Dicts add ``.key``, lists of documents add ``[i]``; a list of scalars stays
    one value (comma-joined when shown) and an empty dict or list is one row.
    """
    if isinstance(doc, dict) and doc:
        rows: list[tuple[str, Any]] = []
        for key, value in doc.items():
            rows += flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return rows
    if isinstance(doc, list) and any(isinstance(v, (dict, list)) for v in doc):
        rows = []
        for i, value in enumerate(doc):
            rows += flatten(value, f"{prefix}[{i}]")
        return rows
    return [(prefix, doc)]


def scalar(value: Any) -> str:
    """One value as a table cell: strings bare, lists comma-joined, the rest as JSON."""
    if isinstance(value, list):
        return escape(", ".join(v if isinstance(v, str) else json.dumps(v) for v in value)) or "[]"
    return cell(value)


def show_fields(doc: Any) -> None:
    """A document as a two-column table, one row per leaf (nested keys dotted:
    ``partitions.t-partition-0.msgInCounter``), so no cell holds a document."""
    if not isinstance(doc, dict):
        out().print(cell(doc))
        return
    table = Table("Field", "Value")
    for key, value in flatten(doc):
        table.add_row(escape(key), scalar(value))
    out().print(table)


def show_stats(doc: dict) -> None:
    """Topic stats: scalar fields, then one row per subscription, consumer,
    publisher and (partitioned stats) partition. A field with no value
    (``producersBlockedByBacklogQuota`` when nothing blocks) shows as ``-``."""
    show_fields({k: ("-" if v is None else v) for k, v in doc.items()
                 if k not in ("subscriptions", "publishers", "partitions")})
    subs = doc.get("subscriptions") or {}
    if subs:
        table = Table("Subscription", "Type", "Backlog", "Backlog bytes", "Unacked", "Consumers", "msg/s out",
                      "Acks/s", "Redelivered/s")
        for name, sub in subs.items():
            table.add_row(escape(name), cell(sub.get("type")), cell(sub.get("msgBacklog")),
                          cell(sub.get("backlogSize")), cell(sub.get("unackedMessages")),
                          str(len(sub.get("consumers", []))), rate(sub.get("msgRateOut")),
                          rate(sub.get("messageAckRate")), rate(sub.get("msgRateRedeliver")))
        out().print(table)
        consumers = [(name, c) for name, sub in subs.items() for c in sub.get("consumers", [])]
        if consumers:
            table = Table("Subscription", "Consumer", "Address", "Permits", "Unacked", "msg/s out", "Acks/s",
                          "Connected since")
            for name, c in consumers:
                table.add_row(escape(name), cell(c.get("consumerName")), cell(c.get("address")),
                              cell(c.get("availablePermits")), cell(c.get("unackedMessages")),
                              rate(c.get("msgRateOut")), rate(c.get("messageAckRate")), cell(c.get("connectedSince")))
            out().print(table)
    pubs = doc.get("publishers") or []
    if pubs:
        table = Table("Producer", "Access mode", "Address", "Messages in", "msg/s in", "Bytes/s in")
        for pub in pubs:
            table.add_row(cell(pub.get("producerName")), cell(pub.get("accessMode")), cell(pub.get("address")),
                          cell(pub.get("msgInCounter")), rate(pub.get("msgRateIn")), rate(pub.get("msgThroughputIn")))
        out().print(table)
    parts = doc.get("partitions") or {}
    if parts:
        table = Table("Partition", "Messages in", "Bytes in", "Storage", "Backlog", "Producers", "Subscriptions")
        for name, part in parts.items():
            table.add_row(escape(name), cell(part.get("msgInCounter")), cell(part.get("bytesInCounter")),
                          cell(part.get("storageSize")), cell(part.get("backlogSize")),
                          str(len(part.get("publishers") or [])), scalar(sorted(part.get("subscriptions") or {})))
        out().print(table)


ROLE_HELP = "The role (a token's subject, a certificate's CN, a user)"


def add_permission_commands(app: typer.Typer, noun: str, grant: Callable[[AdminClient, str, str, list[str]], Any],
                            revoke: Callable[[AdminClient, str, str], Any], *, grant_help: str, revoke_help: str,
                            revoked: str) -> None:
    """``grant-permission NAME --role R --actions A,B`` and
    ``revoke-permission NAME --role R`` on ``app``, for a ``noun``
    (namespace, topic): ``grant(client, name, role, actions)``,
    ``revoke(client, name, role)``; ``revoked`` is the done line, with
    ``{role}`` and ``{name}``."""
    def grant_permission(
            ctx: typer.Context, name: str = typer.Argument(..., metavar=noun),
            role: str = typer.Option(..., "--role", help=ROLE_HELP),
            actions: str = typer.Option(..., "--actions", help="Comma-separated: produce, consume, functions...")
    ) -> None:
        names = [a for a in actions.split(",") if a]
        call(ctx, lambda c: grant(c, name, role, names), done=f"Granted {','.join(names)} on {name} to {role}")

    def revoke_permission(ctx: typer.Context, name: str = typer.Argument(..., metavar=noun),
                          role: str = typer.Option(..., "--role", help=ROLE_HELP)) -> None:
        call(ctx, lambda c: revoke(c, name, role), done=revoked.format(role=role, name=name))

    app.command("grant-permission", help=grant_help)(grant_permission)
    app.command("revoke-permission", help=revoke_help)(revoke_permission)
