"""``magnetar admin namespaces set-/get-/remove-storage-profile``: how a
broker on object storage commits a namespace's entries (``latency``: at
once; ``cost``: gathered up to ``object_commit_interval_ms``). The REST
path is ``/admin/v2/namespaces/<tenant>/<namespace>/storageProfile``.

:func:`register` adds the verbs to the namespaces area (``cli.py`` calls it).
"""
from __future__ import annotations

import typer

from magnetar.storage.config import STORAGE_PROFILES as PROFILES

from .cli_support import call, out, usage
from .client import namespace_path


def _path(namespace: str) -> str:
    return f"namespaces/{namespace_path(namespace)}/storageProfile"


def set_storage_profile(ctx: typer.Context, namespace: str,
                        profile: str = typer.Argument(..., help=f"One of: {', '.join(PROFILES)}")) -> None:
    """Choose how a namespace's entries are committed to object storage:
    latency (a commit at once, within the broker's PUT budget) or cost
    (gathered up to the broker's commit interval). Applies to loaded topics too."""
    if profile not in PROFILES:
        raise usage(f"the storage profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    call(ctx, lambda c: c.request("POST", _path(namespace), profile),
         done=f"Storage profile of {namespace}: {profile}")


def get_storage_profile(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's storage profile ((not set): the broker's default applies)."""
    call(ctx, lambda c: c.request("GET", _path(namespace)), lambda v: out().print(v or "(not set)"))


def remove_storage_profile(ctx: typer.Context, namespace: str) -> None:
    """Remove a namespace's storage profile (the broker's object_storage_profile applies again)."""
    call(ctx, lambda c: c.request("DELETE", _path(namespace)), done=f"Removed the storage profile of {namespace}")


def register(namespaces_app: typer.Typer) -> None:
    namespaces_app.command("set-storage-profile")(set_storage_profile)
    namespaces_app.command("get-storage-profile")(get_storage_profile)
    namespaces_app.command("remove-storage-profile")(remove_storage_profile)
