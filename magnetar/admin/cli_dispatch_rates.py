"""``magnetar admin namespaces|topics set-/get-/remove-dispatch-rate`` and
``...-subscription-dispatch-rate``: pulsar-admin's verbs and options
(``-md`` messages, ``-bd`` bytes, ``-dt`` the period in seconds) for
Pulsar's ``dispatchRate`` (each topic, all its subscriptions together) and
``subscriptionDispatchRate`` (each subscription) policies.

:func:`register` adds them to the two areas (``cli.py`` calls it: the
namespaces area lives there, and importing it from here would be a circle).
"""
from __future__ import annotations

import typer

from .cli_support import call, out, show_fields
from .client import namespace_path, topic_path

APPLIED_HELP = "The value in force (the namespace's when the topic sets none)"
#: (command suffix, REST suffix, what it limits)
RATES = (("dispatch-rate", "dispatchRate", "every subscription of a topic together"),
         ("subscription-dispatch-rate", "subscriptionDispatchRate", "each subscription"))


def _body(msg_rate: int, byte_rate: int, period: int) -> dict:
    return {"dispatchThrottlingRateInMsg": msg_rate, "dispatchThrottlingRateInByte": byte_rate,
            "ratePeriodInSecond": period, "relativeToPublishRate": False}


def _show(value) -> None:
    if value:
        show_fields(value)
    else:
        out().print("(not set)")


def _register_one(app: typer.Typer, path_of, noun: str, name: str, suffix: str, what: str, topic: bool) -> None:
    def set_rate(
        ctx: typer.Context, target: str = typer.Argument(..., metavar=noun.upper()),
        msg_rate: int = typer.Option(-1, "--msg-dispatch-rate", "-md", help="Messages per period; -1: no limit"),
        byte_rate: int = typer.Option(-1, "--byte-dispatch-rate", "-bd", help="Bytes per period; -1: no limit"),
        period: int = typer.Option(1, "--dispatch-rate-period", "-dt", min=1, help="The period, in seconds"),
    ) -> None:
        call(ctx, lambda c: c.request("POST", f"{path_of(target)}/{suffix}", _body(msg_rate, byte_rate, period)),
             done=f"Dispatch rate of {target} ({what}): {msg_rate} msg, {byte_rate} B every {period} s")

    def get_rate(ctx: typer.Context, target: str = typer.Argument(..., metavar=noun.upper()),
                 applied: bool = typer.Option(False, "--applied", help=APPLIED_HELP, hidden=not topic)) -> None:
        query = {"applied": True} if applied else None
        call(ctx, lambda c: c.request("GET", f"{path_of(target)}/{suffix}", query=query) or {}, _show)

    def remove_rate(ctx: typer.Context, target: str = typer.Argument(..., metavar=noun.upper())) -> None:
        call(ctx, lambda c: c.request("DELETE", f"{path_of(target)}/{suffix}"),
             done=f"Removed the {name} of {target}")

    words = name.replace("-", " ")
    whose = "a topic's" if topic else "each topic of a namespace:"
    fallback = "its namespace's applies again" if topic else "no limit then"
    set_rate.__doc__ = f"Limit how fast {whose} messages go to consumers ({what}); the rest waits in the backlog."
    get_rate.__doc__ = f"Show a {noun}'s {words}."
    remove_rate.__doc__ = f"Remove a {noun}'s {words} ({fallback})."
    app.command(f"set-{name}")(set_rate)
    app.command(f"get-{name}")(get_rate)
    app.command(f"remove-{name}")(remove_rate)


def register(namespaces_app: typer.Typer, topics_app: typer.Typer) -> None:
    for name, suffix, what in RATES:
        _register_one(namespaces_app, lambda ns: f"namespaces/{namespace_path(ns)}", "namespace", name, suffix,
                      what, topic=False)
        _register_one(topics_app, topic_path, "topic", name, suffix, what, topic=True)
