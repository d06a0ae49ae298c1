"""``magnetar admin brokers drain | undrain | shutdown | restart-rolling``:
stopping and restarting cluster members without a blip (docs/operations.md);
``brokers update-dynamic-config`` and friends: settings changed without a
restart.

``drain``, ``undrain`` and ``shutdown`` act on the broker ``--url`` names,
or on the broker given as an argument (its id, host:admin port, as
``brokers list`` shows it; asked at the same scheme and credentials).
"""
from __future__ import annotations

from typing import Optional
from urllib.parse import quote

import typer
from rich.markup import escape

from .cli_support import Settings, call, err, out, show_fields, show_list
from .client import AdminClient
from .rolling import RollingRestartError, restart_rolling

BROKER_HELP = "Broker id (host:admin port, see brokers list) [the broker --url names]"


def _on(ctx: typer.Context, broker: str | None) -> typer.Context:
    """``ctx`` aimed at ``broker`` when one is given."""
    if broker:
        settings: Settings = ctx.obj
        scheme = settings.url.split("://", 1)[0] if "://" in settings.url else "http"
        ctx.obj = Settings(f"{scheme}://{broker}", settings.json, settings.client_options)
    return ctx


def register(brokers_app: typer.Typer) -> None:
    @brokers_app.command("drain")
    def brokers_drain(ctx: typer.Context, broker: Optional[str] = typer.Argument(None, help=BROKER_HELP)) -> None:
        """Move every bundle of a broker to the others (clients follow without a lookup); it then takes
        no bundle until undrain or a restart."""
        call(_on(ctx, broker), lambda c: c.request("POST", "/admin/v2/brokers/drain"), show_fields)

    @brokers_app.command("undrain")
    def brokers_undrain(ctx: typer.Context, broker: Optional[str] = typer.Argument(None, help=BROKER_HELP)) -> None:
        """Let a drained broker take bundles again."""
        call(_on(ctx, broker), lambda c: c.request("POST", "/admin/v2/brokers/undrain"), done="Undrained")

    @brokers_app.command("shutdown")
    def brokers_shutdown(ctx: typer.Context, broker: Optional[str] = typer.Argument(None, help=BROKER_HELP)) -> None:
        """Stop a broker gracefully (Pulsar's brokers shutdown): drain, then exit."""
        call(_on(ctx, broker), lambda c: c.request("POST", "/admin/v2/brokers/shutdown"), done="Shut down")

    @brokers_app.command("restart-rolling")
    def brokers_restart_rolling(
        ctx: typer.Context,
        exec_template: Optional[str] = typer.Option(
            None, "--exec",
            help="Shell command that restarts one broker, after its drain ({broker}, {host}, {port} replaced), "
                 "e.g. 'ssh {host} sudo systemctl restart magnetar-broker' [none: shut it down through the API "
                 "and let its supervisor start it again]"),
        settle: float = typer.Option(5.0, "--settle", help="Seconds with no bundle moving that count as settled"),
        timeout: float = typer.Option(180.0, "--timeout", help="Seconds each broker may take to serve again"),
    ) -> None:
        """Restart the cluster's brokers one at a time, each after its bundles moved away, waiting for it
        to serve again and for the cluster to settle."""
        settings: Settings = ctx.obj
        scheme = settings.url.split("://", 1)[0] if "://" in settings.url else "http"

        def client_for(broker: str) -> AdminClient:
            return AdminClient(f"{scheme}://{broker}", **settings.client_options)

        rows: list = []

        def work(seed: AdminClient):
            try:
                rows.extend(restart_rolling(seed, client_for, exec_template=exec_template, settle_s=settle,
                                            timeout_s=timeout, say=lambda line: err.print(escape(line))))
            except RollingRestartError as exc:
                err.print(f"[red]error:[/red] {escape(str(exc))}")
                raise typer.Exit(1)
            return rows

        call(ctx, work, lambda rs: out().print(f"{len(rs)} brokers restarted"))


def register_dynamic_config(brokers_app: typer.Typer) -> None:
    """Pulsar's ``brokers update-dynamic-config`` and friends."""

    @brokers_app.command("update-dynamic-config")
    def update_dynamic_config(
        ctx: typer.Context,
        config: str = typer.Option(..., "--config", "-c", help="Setting name (Magnetar's or Pulsar's)"),
        value: str = typer.Option(..., "--value", "-v", help="New value"),
    ) -> None:
        """Change a dynamic setting on every broker of the cluster, without a restart."""
        call(ctx, lambda c: c.request("POST", f"/admin/v2/brokers/configuration/{quote(config, safe='')}/"
                                              f"{quote(value, safe='')}"),
             done=f"Set {config} = {value}")

    @brokers_app.command("delete-dynamic-config")
    def delete_dynamic_config(ctx: typer.Context, config: str = typer.Option(..., "--config", "-c",
                                                                             help="Setting name")) -> None:
        """Remove a dynamic value: every broker goes back to its config file's."""
        call(ctx, lambda c: c.request("DELETE", f"/admin/v2/brokers/configuration/{quote(config, safe='')}"),
             done=f"Deleted the dynamic value of {config}")

    @brokers_app.command("list-dynamic-config")
    def list_dynamic_config(ctx: typer.Context) -> None:
        """List the settings that change without a restart."""
        call(ctx, lambda c: c.request("GET", "/admin/v2/brokers/configuration"), show_list("Dynamic setting"))

    @brokers_app.command("get-all-dynamic-config")
    def get_all_dynamic_config(ctx: typer.Context) -> None:
        """Show the dynamic values set."""
        call(ctx, lambda c: c.request("GET", "/admin/v2/brokers/configuration/values"), show_fields)

    @brokers_app.command("get-runtime-config")
    def get_runtime_config(ctx: typer.Context) -> None:
        """Show every setting's value in force on the broker."""
        call(ctx, lambda c: c.request("GET", "/admin/v2/brokers/configuration/runtime"), show_fields)
