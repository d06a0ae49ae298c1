"""``magnetar admin ...``: the admin REST API from a shell.

Options before the area name: ``--admin-url`` (default http://localhost:8080,
or ``$MAGNETAR_ADMIN_URL``; ``https://`` for the TLS port), ``--json`` (raw
JSON answers instead of tables), credentials (``--auth-token`` /
``$MAGNETAR_AUTH_TOKEN``, ``--auth-basic user:password``) and TLS files
(``--tls-trust-certs-file``, ``--tls-cert-file``, ``--tls-key-file``). Exit codes: 0 done, 1 the broker refused or could not be reached
(the reason is printed on stderr), 2 bad command-line arguments.

Areas mirror ``pulsar-admin``: ``clusters``, ``tenants``, ``namespaces``,
``topics``. Durations take a unit suffix (``30s``, ``10m``, ``2h``, ``1d``,
``1w``) and sizes one of ``k``, ``M``, ``G``, ``T``; ``-1`` means no limit.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from magnetar.protocol import ProtocolError
from magnetar.security.tls import TlsSetupError

from .client import AdminApiError, AdminClient, AdminUnreachable, namespace_path, topic_path
from .messages import messages_of

DEFAULT_ADMIN_URL = "http://localhost:8080"

app = typer.Typer(help="Administer a Magnetar broker through its REST API (Pulsar admin v2 paths).",
                  no_args_is_help=True, add_completion=False)
clusters_app = typer.Typer(help="Clusters (read-only).", no_args_is_help=True)
tenants_app = typer.Typer(help="Tenants.", no_args_is_help=True)
namespaces_app = typer.Typer(help="Namespaces and their policies.", no_args_is_help=True)
topics_app = typer.Typer(help="Topics, partitioned topics and subscriptions.", no_args_is_help=True)
brokers_app = typer.Typer(help="Brokers of a cluster and topic lookups.", no_args_is_help=True)
schemas_app = typer.Typer(help="Topics' schemas and their versions.", no_args_is_help=True)
app.add_typer(clusters_app, name="clusters")
app.add_typer(brokers_app, name="brokers")
app.add_typer(tenants_app, name="tenants")
app.add_typer(namespaces_app, name="namespaces")
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")

err = Console(stderr=True, soft_wrap=True)


@dataclass
class Settings:
    url: str
    json: bool
    #: Keyword arguments of AdminClient: credentials and TLS files.
    client_options: dict = field(default_factory=dict)


@app.callback()
def _options(
    ctx: typer.Context,
    admin_url: str = typer.Option(DEFAULT_ADMIN_URL, "--admin-url", "--url", envvar="MAGNETAR_ADMIN_URL",
                                  help="The broker's admin HTTP address"),
    json_output: bool = typer.Option(False, "--json", help="Print raw JSON instead of tables"),
    auth_token: str = typer.Option("", "--auth-token", envvar="MAGNETAR_AUTH_TOKEN",
                                   help="A JWT (magnetar tokens create) sent as Authorization: Bearer"),
    auth_basic: str = typer.Option("", "--auth-basic", envvar="MAGNETAR_AUTH_BASIC",
                                   help="user:password sent as Authorization: Basic"),
    tls_trust_certs_file: str = typer.Option("", "--tls-trust-certs-file",
                                             help="CA certificates that verify an https broker"),
    tls_cert_file: str = typer.Option("", "--tls-cert-file", help="Client certificate (the tls provider)"),
    tls_key_file: str = typer.Option("", "--tls-key-file", help="Its private key"),
    tls_allow_insecure: bool = typer.Option(False, "--tls-allow-insecure",
                                            help="Do not verify the broker's certificate (testing only)"),
) -> None:
    ctx.obj = Settings(admin_url, json_output, {
        "auth_token": auth_token, "basic_auth": auth_basic, "tls_trust_certs_file": tls_trust_certs_file,
        "tls_cert_file": tls_cert_file, "tls_key_file": tls_key_file, "tls_allow_insecure": tls_allow_insecure})


# -- parsing -------------------------------------------------------------------------
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_BYTES = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def _usage(message: str) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(2)


def parse_duration(text: str, default_unit: str = "s") -> int:
    """``"10m"`` -> 600 seconds; ``"-1"`` -> -1; a bare number uses ``default_unit``."""
    text = text.strip().lower()
    if text == "-1":
        return -1
    match = re.fullmatch(r"(\d+)([smhdw]?)", text)
    if not match:
        raise _usage(f"invalid duration {text!r}: use a number with s, m, h, d or w (or -1)")
    return int(match.group(1)) * _SECONDS[match.group(2) or default_unit]


def parse_size(text: str) -> int:
    """``"10M"`` -> bytes; ``"-1"`` -> -1; a bare number is bytes."""
    text = text.strip().lower()
    if text == "-1":
        return -1
    match = re.fullmatch(r"(\d+)([kmgt]?)", text)
    if not match:
        raise _usage(f"invalid size {text!r}: use a number with k, M, G or T (or -1)")
    return int(match.group(1)) * _BYTES[match.group(2)]


# -- calling and printing ----------------------------------------------------------
def _out() -> Console:
    console = Console()
    # Tables must not wrap names when piped (scripts, tests read them).
    return console if console.is_terminal else Console(width=250)


def _call(ctx: typer.Context, call: Callable[[AdminClient], Any], render: Callable[[Any], None] | None = None,
          done: str | None = None) -> None:
    settings: Settings = ctx.obj
    try:
        result = call(AdminClient(settings.url, **settings.client_options))
    except TlsSetupError as exc:
        raise _usage(str(exc))
    except AdminApiError as exc:
        err.print(f"[red]error:[/red] {exc.status} {escape(exc.reason)}")
        raise typer.Exit(1)
    except AdminUnreachable as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1)
    except ValueError as exc:  # a malformed name or id given on the command line
        raise _usage(str(exc))
    if settings.json:
        if result is not None:
            typer.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    if render is not None:
        render(result)
    elif done is not None:
        _out().print(escape(done))


def _list(header: str) -> Callable[[Any], None]:
    def render(items: list) -> None:
        table = Table(header)
        for item in items:
            table.add_row(escape(str(item)))
        _out().print(table)

    return render


def _cell(value: Any) -> str:
    return escape(value if isinstance(value, str) else json.dumps(value, sort_keys=True))


def _fields(doc: Any) -> None:
    """A document as a two-column table; nested values as compact JSON."""
    if not isinstance(doc, dict):
        _out().print(_cell(doc))
        return
    table = Table("Field", "Value")
    for key, value in doc.items():
        table.add_row(escape(str(key)), _cell(value))
    _out().print(table)


def _stats(doc: dict) -> None:
    """Topic stats: scalar fields, then one row per subscription and publisher."""
    _fields({k: v for k, v in doc.items() if k not in ("subscriptions", "publishers")})
    subs = doc.get("subscriptions") or {}
    if subs:
        table = Table("Subscription", "Type", "Backlog", "Consumers")
        for name, sub in subs.items():
            table.add_row(escape(name), _cell(sub.get("type")), _cell(sub.get("msgBacklog")),
                          str(len(sub.get("consumers", []))))
        _out().print(table)
    pubs = doc.get("publishers") or []
    if pubs:
        table = Table("Producer", "Access mode", "Messages in")
        for pub in pubs:
            table.add_row(_cell(pub.get("producerName")), _cell(pub.get("accessMode")), _cell(pub.get("msgInCounter")))
        _out().print(table)


# -- clusters ----------------------------------------------------------------------------
@clusters_app.command("list")
def clusters_list(ctx: typer.Context) -> None:
    """List the clusters."""
    _call(ctx, lambda c: c.clusters(), _list("Cluster"))


@clusters_app.command("get")
def clusters_get(ctx: typer.Context, cluster: str) -> None:
    """Show a cluster's URLs."""
    _call(ctx, lambda c: c.cluster(cluster), _fields)


# -- brokers ----------------------------------------------------------------------------
@brokers_app.command("list")
def brokers_list(ctx: typer.Context, cluster: Optional[str] = typer.Argument(
        None, help="Cluster name [the broker's own cluster]")) -> None:
    """List the live brokers (host:web port) of a cluster."""
    def call(c: AdminClient):
        return c.request("GET", f"/admin/v2/brokers/{cluster or c.clusters()[0]}")
    _call(ctx, call, _list("Broker"))


@brokers_app.command("load")
def brokers_load(ctx: typer.Context) -> None:
    """Each broker's load (message rate in) and the bundles it owns."""
    def render(doc: dict) -> None:
        table = Table("Broker", "msg/s in", "Bundles")
        for broker, entry in doc.items():
            rate = entry.get("load", {}).get("msg_rate_in")
            table.add_row(broker, "-" if rate is None else f"{rate:.0f}", ", ".join(entry.get("bundles", [])))
        _out().print(table)
    _call(ctx, lambda c: c.request("GET", "/admin/v2/broker-stats/load-report"), render)


@brokers_app.command("leader")
def brokers_leader(ctx: typer.Context) -> None:
    """Show the leader broker."""
    _call(ctx, lambda c: c.request("GET", "/admin/v2/brokers/leaderBroker"), _fields)


@brokers_app.command("lookup")
def brokers_lookup(ctx: typer.Context, topic: str) -> None:
    """Show the broker that serves a topic (assigning its bundle if nobody owns it)."""
    _call(ctx, lambda c: c.request("GET", "/lookup/v2/topic/" + topic_path(topic)), _fields)


@namespaces_app.command("bundles")
def namespaces_bundles(ctx: typer.Context, namespace: str = typer.Argument(..., help="tenant/namespace")) -> None:
    """Show a namespace's bundles, their states and owners."""
    def render(doc: dict) -> None:
        table = Table("Bundle", "State", "Owner")
        for rng, state in doc.get("states", {}).items():
            table.add_row(rng, state, _cell(doc.get("owners", {}).get(rng)))
        _out().print(table)
    _call(ctx, lambda c: c.request("GET", f"/admin/v2/namespaces/{namespace_path(namespace)}/bundles"), render)


@namespaces_app.command("unload")
def namespaces_unload(
    ctx: typer.Context,
    namespace: str = typer.Argument(..., help="tenant/namespace"),
    bundle: str = typer.Option(..., "--bundle", "-b", help="0xLLLLLLLL_0xUUUUUUUU (see namespaces bundles)"),
    destination: Optional[str] = typer.Option(None, "--destination", "-d",
                                              help="Broker id (host:web port) [the least loaded]"),
) -> None:
    """Move a bundle to another broker; clients follow without a lookup."""
    query = {"destinationBroker": destination} if destination else None
    _call(ctx, lambda c: c.request("PUT", f"namespaces/{namespace_path(namespace)}/{bundle}/unload",
                                   query=query), lambda _: _out().print(f"bundle {bundle} moved"))


# -- tenants --------------------------------------------------------------------------------
@tenants_app.command("list")
def tenants_list(ctx: typer.Context) -> None:
    """List the tenants."""
    _call(ctx, lambda c: c.tenants(), _list("Tenant"))


@tenants_app.command("get")
def tenants_get(ctx: typer.Context, tenant: str) -> None:
    """Show a tenant's admin roles and allowed clusters."""
    _call(ctx, lambda c: c.tenant(tenant), _fields)


@tenants_app.command("create")
def tenants_create(
    ctx: typer.Context,
    tenant: str,
    allowed_clusters: Optional[str] = typer.Option(None, "--allowed-clusters", "-c",
                                                   help="Comma-separated clusters [all]"),
    admin_roles: Optional[str] = typer.Option(None, "--admin-roles", "-r", help="Comma-separated roles"),
) -> None:
    """Create a tenant."""
    clusters = [c for c in (allowed_clusters or "").split(",") if c]
    roles = [r for r in (admin_roles or "").split(",") if r]
    _call(ctx, lambda c: c.create_tenant(tenant, clusters or None, roles), done=f"Created tenant {tenant}")


@tenants_app.command("delete")
def tenants_delete(ctx: typer.Context, tenant: str) -> None:
    """Delete a tenant (it must have no namespaces)."""
    _call(ctx, lambda c: c.delete_tenant(tenant), done=f"Deleted tenant {tenant}")


# -- namespaces --------------------------------------------------------------------------------
@namespaces_app.command("list")
def namespaces_list(ctx: typer.Context, tenant: str) -> None:
    """List a tenant's namespaces."""
    _call(ctx, lambda c: c.namespaces(tenant), _list("Namespace"))


@namespaces_app.command("create")
def namespaces_create(ctx: typer.Context, namespace: str = typer.Argument(..., help="tenant/namespace"),
                      clusters: Optional[str] = typer.Option(
                          None, "--clusters", "-c",
                          help="Comma-separated replication clusters [the tenant's first allowed one]")) -> None:
    """Create a namespace (replicated between the --clusters regions)."""
    names = [c for c in (clusters or "").split(",") if c]
    _call(ctx, lambda c: c.create_namespace(namespace, names or None), done=f"Created namespace {namespace}")


@namespaces_app.command("get-retention")
def namespaces_get_retention(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's retention policy."""
    _call(ctx, lambda c: c.retention(namespace) or {}, _fields)


@namespaces_app.command("permissions")
def namespaces_permissions(ctx: typer.Context, namespace: str) -> None:
    """Show the roles granted actions on a namespace."""
    _call(ctx, lambda c: c.permissions(namespace), _fields)


@namespaces_app.command("grant-permission")
def namespaces_grant_permission(
        ctx: typer.Context, namespace: str,
        role: str = typer.Option(..., "--role", help="The role (a token's subject, a certificate's CN, a user)"),
        actions: str = typer.Option(..., "--actions", help="Comma-separated: produce, consume, functions...")) -> None:
    """Grant a role actions on every topic of a namespace."""
    names = [a for a in actions.split(",") if a]
    _call(ctx, lambda c: c.grant_permission(namespace, role, names),
          done=f"Granted {','.join(names)} on {namespace} to {role}")


@namespaces_app.command("revoke-permission")
def namespaces_revoke_permission(ctx: typer.Context, namespace: str,
                                 role: str = typer.Option(..., "--role", help="The role")) -> None:
    """Take back every action a role was granted on a namespace."""
    _call(ctx, lambda c: c.revoke_permission(namespace, role), done=f"Revoked {role}'s permissions on {namespace}")


@namespaces_app.command("get-clusters")
def namespaces_get_clusters(ctx: typer.Context, namespace: str) -> None:
    """Show the clusters a namespace replicates between."""
    _call(ctx, lambda c: c.replication_clusters(namespace), _list("Cluster"))


@namespaces_app.command("set-clusters")
def namespaces_set_clusters(ctx: typer.Context, namespace: str,
                            clusters: str = typer.Option(..., "--clusters", "-c",
                                                         help="Comma-separated cluster names")) -> None:
    """Set the clusters a namespace replicates between (each must be allowed by its tenant)."""
    names = [c for c in clusters.split(",") if c]
    _call(ctx, lambda c: c.set_replication_clusters(namespace, names),
          done=f"Set replication clusters of {namespace}: {','.join(names)}")


@namespaces_app.command("delete")
def namespaces_delete(ctx: typer.Context, namespace: str,
                      force: bool = typer.Option(False, "--force", "-f", help="Delete its topics too")) -> None:
    """Delete a namespace (it must have no topics, unless --force)."""
    _call(ctx, lambda c: c.delete_namespace(namespace, force), done=f"Deleted namespace {namespace}")


@namespaces_app.command("policies")
def namespaces_policies(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's policies."""
    _call(ctx, lambda c: c.policies(namespace), _fields)


@namespaces_app.command("set-retention")
def namespaces_set_retention(
    ctx: typer.Context,
    namespace: str,
    time_: str = typer.Option(..., "--time", "-t", help="How long consumed data is kept: 30m, 12h, 7d; -1: no limit"),
    size: str = typer.Option(..., "--size", "-s", help="How much consumed data is kept: 100M, 10G; -1: no limit"),
) -> None:
    """Keep consumed messages up to a time and a size (both 0: keep none)."""
    seconds, nbytes = parse_duration(time_, "m"), parse_size(size)
    minutes = -1 if seconds < 0 else seconds // 60
    size_mb = -1 if nbytes < 0 else nbytes // (1024 * 1024)
    if seconds > 0 and minutes == 0 or nbytes > 0 and size_mb == 0:
        raise _usage("retention is counted in whole minutes and megabytes: use at least 1m and 1M")
    _call(ctx, lambda c: c.set_retention(namespace, minutes, size_mb),
          done=f"Retention of {namespace}: {minutes} min, {size_mb} MB")


@namespaces_app.command("set-message-ttl")
def namespaces_set_message_ttl(
    ctx: typer.Context,
    namespace: str,
    ttl: str = typer.Option(..., "--ttl", "-t", help="Unacknowledged messages expire after this: 3600, 1h; 0: never"),
) -> None:
    """Expire unacknowledged messages older than a TTL."""
    seconds = parse_duration(ttl)
    if seconds < 0:
        raise _usage("the TTL must be >= 0 (0: messages never expire)")
    _call(ctx, lambda c: c.set_message_ttl(namespace, seconds), done=f"Message TTL of {namespace}: {seconds} s")


@namespaces_app.command("set-deduplication")
def namespaces_set_deduplication(
    ctx: typer.Context,
    namespace: str,
    enable: bool = typer.Option(..., "--enable/--disable", help="Turn deduplication on or off"),
) -> None:
    """Turn message deduplication on or off for a namespace."""
    _call(ctx, lambda c: c.set_deduplication(namespace, enable),
          done=f"Deduplication of {namespace}: {'on' if enable else 'off'}")


@namespaces_app.command("set-backlog-quota")
def namespaces_set_backlog_quota(
    ctx: typer.Context,
    namespace: str,
    policy: str = typer.Option(..., "--policy", "-p",
                               help="producer_request_hold, producer_exception or consumer_backlog_eviction"),
    limit_size: str = typer.Option("-1", "--limit-size", "-l", help="Backlog size limit: 500M, 10G; -1: none"),
    limit_time: str = typer.Option("0", "--limit-time", "--lt", help="Backlog age limit: 30m, 1h; 0: none"),
    quota_type: str = typer.Option("destination_storage", "--type", "-t",
                                   help="destination_storage (size) or message_age (time)"),
) -> None:
    """Limit how much a namespace's topics may hold for their slowest subscription."""
    size, seconds = parse_size(limit_size), parse_duration(limit_time)
    _call(ctx, lambda c: c.set_backlog_quota(namespace, quota_type, size, seconds, policy),
          done=f"Backlog quota of {namespace} ({quota_type}): size {size}, time {seconds} s, {policy}")


@namespaces_app.command("get-backlog-quotas")
def namespaces_get_backlog_quotas(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's backlog quotas by type."""
    _call(ctx, lambda c: c.backlog_quotas(namespace), _fields)


@namespaces_app.command("remove-backlog-quota")
def namespaces_remove_backlog_quota(
    ctx: typer.Context,
    namespace: str,
    quota_type: str = typer.Option("destination_storage", "--type", "-t",
                                   help="destination_storage or message_age"),
) -> None:
    """Remove a namespace's backlog quota of one type."""
    _call(ctx, lambda c: c.remove_backlog_quota(namespace, quota_type),
          done=f"Removed the {quota_type} backlog quota of {namespace}")


# -- topics --------------------------------------------------------------------------------------
@topics_app.command("list")
def topics_list(ctx: typer.Context, namespace: str) -> None:
    """List a namespace's topics (partitions included)."""
    _call(ctx, lambda c: c.topics(namespace), _list("Topic"))


@topics_app.command("list-partitioned-topics")
def topics_list_partitioned(ctx: typer.Context, namespace: str) -> None:
    """List a namespace's partitioned topics."""
    _call(ctx, lambda c: c.partitioned_topics(namespace), _list("Partitioned topic"))


@topics_app.command("create")
def topics_create(ctx: typer.Context, topic: str) -> None:
    """Create a non-partitioned topic."""
    _call(ctx, lambda c: c.create_topic(topic), done=f"Created topic {topic}")


@topics_app.command("delete")
def topics_delete(ctx: typer.Context, topic: str,
                  force: bool = typer.Option(False, "--force", "-f", help="Even with producers or consumers")) -> None:
    """Delete a topic with its subscriptions and data."""
    _call(ctx, lambda c: c.delete_topic(topic, force), done=f"Deleted topic {topic}")


@topics_app.command("create-partitioned-topic")
def topics_create_partitioned(ctx: typer.Context, topic: str,
                              partitions: int = typer.Option(..., "--partitions", "-p")) -> None:
    """Create a partitioned topic."""
    _call(ctx, lambda c: c.create_partitioned_topic(topic, partitions),
          done=f"Created {topic} with {partitions} partitions")


@topics_app.command("update-partitioned-topic")
def topics_update_partitioned(ctx: typer.Context, topic: str,
                              partitions: int = typer.Option(..., "--partitions", "-p")) -> None:
    """Grow a partitioned topic (partitions are only ever added)."""
    _call(ctx, lambda c: c.update_partitioned_topic(topic, partitions),
          done=f"{topic} now has {partitions} partitions")


@topics_app.command("get-partitioned-topic-metadata")
def topics_partitioned_metadata(ctx: typer.Context, topic: str) -> None:
    """Show a topic's partition count (0: not partitioned)."""
    _call(ctx, lambda c: c.partitioned_topic_metadata(topic), _fields)


@topics_app.command("delete-partitioned-topic")
def topics_delete_partitioned(ctx: typer.Context, topic: str,
                              force: bool = typer.Option(False, "--force", "-f")) -> None:
    """Delete a partitioned topic and all its partitions."""
    _call(ctx, lambda c: c.delete_partitioned_topic(topic, force), done=f"Deleted partitioned topic {topic}")


@schemas_app.command("get")
def schemas_get(ctx: typer.Context, topic: str,
                version: Optional[int] = typer.Option(None, "--version", help="A version [the latest]")) -> None:
    """Show a topic's schema."""
    _call(ctx, lambda c: c.schema(topic, version), _fields)


@schemas_app.command("upload")
def schemas_upload(ctx: typer.Context, topic: str,
                   filename: Path = typer.Option(..., "--filename", "-f",
                                                 help='JSON {"type": "AVRO", "schema": "...", "properties": {}}')) -> None:
    """Register a schema version (refused if incompatible)."""
    try:
        payload = json.loads(filename.read_text())
    except (OSError, ValueError) as exc:
        raise _usage(f"cannot read a schema payload from {filename}: {exc}")
    _call(ctx, lambda c: c.upload_schema(topic, payload), _fields)


@schemas_app.command("delete")
def schemas_delete(ctx: typer.Context, topic: str) -> None:
    """Delete every version of a topic's schema."""
    _call(ctx, lambda c: c.delete_schema(topic), done=f"Deleted the schema of {topic}")


@topics_app.command("last-message-id")
def topics_last_message_id(ctx: typer.Context, topic: str) -> None:
    """Show the id of the topic's last message."""
    _call(ctx, lambda c: c.last_message_id(topic), _fields)


@topics_app.command("peek-messages")
def topics_peek_messages(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    count: int = typer.Option(1, "--count", "-n", help="Entries to peek at, from the first unacknowledged"),
) -> None:
    """Show the next messages of a subscription's backlog without consuming them."""
    if count < 1:
        raise _usage("--count must be at least 1")

    def peek(c: AdminClient) -> list[dict]:
        found: list[dict] = []
        for position in range(1, count + 1):
            try:
                raw, headers = c.peek_message(topic, subscription, position)
            except AdminApiError as exc:
                if exc.status == 404 and found:
                    break  # the backlog is shorter than --count
                raise
            try:
                found.extend(messages_of(raw, headers))
            except ProtocolError as exc:
                raise AdminApiError(422, f"entry {position} cannot be split into messages: {exc}",
                                    "GET", topic) from None
        return found

    def render(messages: list[dict]) -> None:
        for msg in messages:
            _fields({k: v for k, v in msg.items() if v not in (None, {})})

    _call(ctx, peek, render)


@topics_app.command("compact")
def topics_compact(ctx: typer.Context, topic: str) -> None:
    """Start compacting a topic (the latest value per key); see compaction-status."""
    _call(ctx, lambda c: c.compact(topic), done=f"Compaction of {topic} started")


@topics_app.command("compaction-status")
def topics_compaction_status(ctx: typer.Context, topic: str) -> None:
    """Show the state of the topic's last compaction."""
    _call(ctx, lambda c: c.compaction_status(topic), _fields)


@topics_app.command("permissions")
def topics_permissions(ctx: typer.Context, topic: str) -> None:
    """Show every role's actions on a topic (its namespace's grants and its own)."""
    _call(ctx, lambda c: c.topic_permissions(topic), _fields)


@topics_app.command("grant-permission")
def topics_grant_permission(
        ctx: typer.Context, topic: str, role: str = typer.Option(..., "--role", help="The role"),
        actions: str = typer.Option(..., "--actions", help="Comma-separated: produce, consume...")) -> None:
    """Grant a role actions on one topic."""
    names = [a for a in actions.split(",") if a]
    _call(ctx, lambda c: c.grant_topic_permission(topic, role, names),
          done=f"Granted {','.join(names)} on {topic} to {role}")


@topics_app.command("revoke-permission")
def topics_revoke_permission(ctx: typer.Context, topic: str,
                             role: str = typer.Option(..., "--role", help="The role")) -> None:
    """Take back a role's grant on one topic (its namespace's grants stay)."""
    _call(ctx, lambda c: c.revoke_topic_permission(topic, role), done=f"Revoked {role}'s grant on {topic}")


@topics_app.command("get-replication-clusters")
def topics_get_replication_clusters(
        ctx: typer.Context, topic: str,
        applied: bool = typer.Option(False, "--applied", help="The clusters in effect (the namespace's if unset)")) -> None:
    """Show the clusters a topic replicates between (its own setting)."""
    _call(ctx, lambda c: c.topic_replication_clusters(topic, applied), _list("Cluster"))


@topics_app.command("set-replication-clusters")
def topics_set_replication_clusters(ctx: typer.Context, topic: str,
                                    clusters: str = typer.Option(..., "--clusters", "-c",
                                                                 help="Comma-separated cluster names")) -> None:
    """Replicate a topic between these clusters, whatever its namespace says."""
    names = [c for c in clusters.split(",") if c]
    _call(ctx, lambda c: c.set_topic_replication_clusters(topic, names),
          done=f"Set replication clusters of {topic}: {','.join(names)}")


@topics_app.command("remove-replication-clusters")
def topics_remove_replication_clusters(ctx: typer.Context, topic: str) -> None:
    """Drop a topic's own replication clusters: its namespace's apply again."""
    _call(ctx, lambda c: c.remove_topic_replication_clusters(topic), done=f"Removed replication clusters of {topic}")


@topics_app.command("stats")
def topics_stats(ctx: typer.Context, topic: str) -> None:
    """Show a topic's stats."""
    _call(ctx, lambda c: c.stats(topic), _stats)


@topics_app.command("partitioned-stats")
def topics_partitioned_stats(ctx: typer.Context, topic: str) -> None:
    """Show a partitioned topic's stats, summed over its partitions."""
    _call(ctx, lambda c: c.partitioned_stats(topic), _stats)


@topics_app.command("stats-internal")
def topics_stats_internal(ctx: typer.Context, topic: str) -> None:
    """Show a topic's storage: ledgers, cursors, properties."""
    _call(ctx, lambda c: c.internal_stats(topic), _fields)


@topics_app.command("unload")
def topics_unload(ctx: typer.Context, topic: str) -> None:
    """Unload a topic (clients reconnect; it is reloaded on demand)."""
    _call(ctx, lambda c: c.unload(topic), done=f"Unloaded {topic}")


@topics_app.command("terminate")
def topics_terminate(ctx: typer.Context, topic: str) -> None:
    """Terminate a topic: no more messages can be published to it."""
    _call(ctx, lambda c: c.terminate(topic),
          lambda mid: _out().print(f"Terminated {escape(topic)} at {mid['ledgerId']}:{mid['entryId']}"))


@topics_app.command("subscriptions")
def topics_subscriptions(ctx: typer.Context, topic: str) -> None:
    """List a topic's subscriptions."""
    _call(ctx, lambda c: c.subscriptions(topic), _list("Subscription"))


@topics_app.command("create-subscription")
def topics_create_subscription(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    message_id: str = typer.Option("latest", "--message-id", "-m", help="earliest, latest or ledger:entry"),
) -> None:
    """Create a durable subscription at a position."""
    _call(ctx, lambda c: c.create_subscription(topic, subscription, message_id),
          done=f"Created subscription {subscription} on {topic}")


@topics_app.command("unsubscribe")
def topics_unsubscribe(ctx: typer.Context, topic: str, subscription: str = typer.Option(..., "--subscription", "-s"),
                       force: bool = typer.Option(False, "--force", "-f", help="Even with connected consumers")) -> None:
    """Delete a subscription."""
    _call(ctx, lambda c: c.delete_subscription(topic, subscription, force),
          done=f"Deleted subscription {subscription} of {topic}")


@topics_app.command("reset-cursor")
def topics_reset_cursor(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    time_: Optional[str] = typer.Option(None, "--time", "-t", help="Go back this long: 10m, 2h, 1d"),
    timestamp: Optional[int] = typer.Option(None, "--timestamp", help="Publish time to go to (ms since epoch)"),
    message_id: Optional[str] = typer.Option(None, "--message-id", "-m", help="earliest, latest or ledger:entry"),
) -> None:
    """Move a subscription to a time or a message id (its consumers reconnect)."""
    given = [x for x in (time_, timestamp, message_id) if x is not None]
    if len(given) != 1:
        raise _usage("give exactly one of --time, --timestamp or --message-id")
    if message_id is not None:
        _call(ctx, lambda c: c.reset_cursor_to_message(topic, subscription, message_id),
              done=f"Reset {subscription} to {message_id}")
        return
    if timestamp is None:
        seconds = parse_duration(time_, "m")
        if seconds < 0:
            raise _usage("--time must be a duration >= 0")
        timestamp = int(time.time() * 1000) - seconds * 1000
    _call(ctx, lambda c: c.reset_cursor_to_time(topic, subscription, timestamp),
          done=f"Reset {subscription} to publish time {timestamp}")


@topics_app.command("skip")
def topics_skip(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    count: Optional[int] = typer.Option(None, "--count", "-n", help="Entries to skip"),
    all_: bool = typer.Option(False, "--all", help="Skip the whole backlog"),
) -> None:
    """Skip entries of a subscription's backlog."""
    if all_ == (count is not None):
        raise _usage("give either --count N or --all")
    if all_:
        _call(ctx, lambda c: c.skip_all(topic, subscription), done=f"Cleared the backlog of {subscription}")
        return
    if count < 1:
        raise _usage("--count must be at least 1")

    def skip_and_count(c: AdminClient) -> int | None:
        # The REST answer is empty (Pulsar's): say what really moved from the backlog.
        before = c.stats(topic)["subscriptions"].get(subscription, {}).get("msgBacklog")
        c.skip(topic, subscription, count)
        after = c.stats(topic)["subscriptions"].get(subscription, {}).get("msgBacklog")
        return None if before is None or after is None else max(0, before - after)

    settings: Settings = ctx.obj
    skipped: list = []
    _call(ctx, lambda c: skipped.append(skip_and_count(c)))
    if not settings.json:
        n = skipped[0] if skipped and skipped[0] is not None else count
        note = "" if n >= count else f" (the backlog held {n})"
        _out().print(f"Skipped {n} entries of {subscription}{note}")


@topics_app.command("expire-messages")
def topics_expire_messages(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    expire_time: str = typer.Option(..., "--expire-time", "-t", help="Expire what is older than this: 60, 10m"),
) -> None:
    """Acknowledge a subscription's messages older than an age."""
    seconds = parse_duration(expire_time)
    if seconds < 0:
        raise _usage("--expire-time must be >= 0")
    _call(ctx, lambda c: c.expire_messages(topic, subscription, seconds),
          done=f"Expired messages of {subscription} older than {seconds} s")
