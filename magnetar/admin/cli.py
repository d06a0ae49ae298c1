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

from typing import Optional

import typer
from rich.table import Table

from .cli_support import (Settings, add_permission_commands, call, cell, out, parse_duration, parse_size, show_fields,
                          show_list, usage)
from .cli_topics import schemas_app, topics_app
from . import cli_brokers_ops, cli_dispatch_rates
from . import cli_storage_profile
from . import cli_topic_policies  # noqa: F401  (registers topics set-/get-/remove-<policy>)
from .client import AdminClient, namespace_path, topic_path

__all__ = ["app", "parse_duration", "parse_size"]

DEFAULT_ADMIN_URL = "http://localhost:8080"

app = typer.Typer(help="Administer a Magnetar broker through its REST API (Pulsar admin v2 paths).",
                  no_args_is_help=True, add_completion=False)
clusters_app = typer.Typer(help="Clusters: this one and the remote regions.", no_args_is_help=True)
tenants_app = typer.Typer(help="Tenants.", no_args_is_help=True)
namespaces_app = typer.Typer(help="Namespaces and their policies.", no_args_is_help=True)
brokers_app = typer.Typer(help="Brokers of a cluster and topic lookups.", no_args_is_help=True)
app.add_typer(clusters_app, name="clusters")
app.add_typer(brokers_app, name="brokers")
app.add_typer(tenants_app, name="tenants")
app.add_typer(namespaces_app, name="namespaces")
app.add_typer(topics_app, name="topics")
app.add_typer(schemas_app, name="schemas")
cli_dispatch_rates.register(namespaces_app, topics_app)
cli_brokers_ops.register(brokers_app)
cli_brokers_ops.register_dynamic_config(brokers_app)
cli_storage_profile.register(namespaces_app)


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


# -- clusters ----------------------------------------------------------------------------
@clusters_app.command("list")
def clusters_list(ctx: typer.Context) -> None:
    """List the clusters."""
    call(ctx, lambda c: c.clusters(), show_list("Cluster"))


@clusters_app.command("get")
def clusters_get(ctx: typer.Context, cluster: str) -> None:
    """Show a cluster's URLs."""
    call(ctx, lambda c: c.cluster(cluster), show_fields)


def _cluster_data(url: str | None, url_secure: str | None, broker_url: str | None,
                  broker_url_secure: str | None) -> dict:
    data = {"serviceUrl": url, "serviceUrlTls": url_secure, "brokerServiceUrl": broker_url,
            "brokerServiceUrlTls": broker_url_secure}
    return {k: v for k, v in data.items() if v}


URL_HELP = "Admin (web service) URL, http://host:8080"
BROKER_URL_HELP = "Broker service URL, pulsar://host:6650"


def _cluster_command(method: str, done: str):
    """``clusters create`` (PUT) and ``clusters update`` (POST): the same options."""
    def command(
        ctx: typer.Context, cluster: str,
        url: Optional[str] = typer.Option(None, "--url", help=URL_HELP),
        url_secure: Optional[str] = typer.Option(None, "--url-secure", help="https:// admin URL"),
        broker_url: Optional[str] = typer.Option(None, "--broker-url", help=BROKER_URL_HELP),
        broker_url_secure: Optional[str] = typer.Option(None, "--broker-url-secure", help="pulsar+ssl:// URL"),
    ) -> None:
        data = _cluster_data(url, url_secure, broker_url, broker_url_secure)
        call(ctx, lambda c: c.request(method, f"clusters/{cluster}", data), done=f"{done} cluster {cluster}")
    return command


clusters_app.command("create", help="Record a cluster (a remote region) with its URLs.")(_cluster_command("PUT", "Created"))
clusters_app.command("update", help="Replace a cluster's URLs.")(_cluster_command("POST", "Updated"))


@clusters_app.command("delete")
def clusters_delete(ctx: typer.Context, cluster: str) -> None:
    """Forget a cluster (not this broker's own, nor one a namespace replicates to)."""
    call(ctx, lambda c: c.request("DELETE", f"clusters/{cluster}"), done=f"Deleted cluster {cluster}")


# -- brokers ----------------------------------------------------------------------------
@brokers_app.command("list")
def brokers_list(ctx: typer.Context, cluster: Optional[str] = typer.Argument(
        None, help="Cluster name [the broker's own cluster]")) -> None:
    """List the live brokers (host:web port) of a cluster."""
    def brokers_of(c: AdminClient):
        return c.request("GET", f"/admin/v2/brokers/{cluster or c.clusters()[0]}")
    call(ctx, brokers_of, show_list("Broker"))


@brokers_app.command("load")
def brokers_load(ctx: typer.Context) -> None:
    """Each broker's load report (CPU, memory, message rates and bytes in and out) and its bundles."""
    def number(load: dict, key: str, scale: float = 1.0, fmt: str = "{:,.0f}") -> str:
        value = load.get(key)
        return "-" if value is None else fmt.format(value / scale)

    def render(doc: dict) -> None:
        table = Table("Broker", "CPU (cores)", "RSS MB", "msg/s in", "msg/s out", "KB/s in", "KB/s out", "Bundles")
        for broker, entry in doc.items():
            load = entry.get("load", {})
            table.add_row(broker, number(load, "cpu", fmt="{:.2f}"), number(load, "memory_rss", 1 << 20),
                          number(load, "msg_rate_in"), number(load, "msg_rate_out"),
                          number(load, "throughput_in", 1024), number(load, "throughput_out", 1024),
                          ", ".join(entry.get("bundles", [])))
        out().print(table)
    call(ctx, lambda c: c.request("GET", "/admin/v2/broker-stats/load-report"), render)


@brokers_app.command("leader")
def brokers_leader(ctx: typer.Context) -> None:
    """Show the leader broker."""
    call(ctx, lambda c: c.request("GET", "/admin/v2/brokers/leaderBroker"), show_fields)


@brokers_app.command("lookup")
def brokers_lookup(ctx: typer.Context, topic: str) -> None:
    """Show the broker that serves a topic (assigning its bundle if nobody owns it)."""
    call(ctx, lambda c: c.request("GET", "/lookup/v2/topic/" + topic_path(topic)), show_fields)


@namespaces_app.command("bundles")
def namespaces_bundles(ctx: typer.Context, namespace: str = typer.Argument(..., help="tenant/namespace")) -> None:
    """Show a namespace's bundles, their states and owners."""
    def render(doc: dict) -> None:
        table = Table("Bundle", "State", "Owner")
        for rng, state in doc.get("states", {}).items():
            table.add_row(rng, state, cell(doc.get("owners", {}).get(rng)))
        out().print(table)
    call(ctx, lambda c: c.request("GET", f"/admin/v2/namespaces/{namespace_path(namespace)}/bundles"), render)


def _bundle_option(ctx: typer.Context, namespace: str, bundle: str | None, topic: str | None) -> str:
    """The bundle named by --bundle, or the one that holds --topic (asked of the broker)."""
    if bool(bundle) == bool(topic):
        raise typer.BadParameter("give exactly one of --bundle and --topic")
    if bundle:
        return bundle
    found: dict = {}
    # The lambda answers None, so --json prints nothing for this first call.
    call(ctx, lambda c: found.update(c.request("GET", "/lookup/v2/topic/" + topic_path(topic) + "/bundle")))
    if found.get("namespace") != namespace.strip("/"):
        raise typer.BadParameter(f"topic {topic} is not in namespace {namespace}")
    return found["bundle"]


BUNDLE_HELP = "0xLLLLLLLL_0xUUUUUUUU (see namespaces bundles)"
TOPIC_HELP = "Instead of --bundle: the bundle that holds this topic"


@namespaces_app.command("unload")
def namespaces_unload(
    ctx: typer.Context,
    namespace: str = typer.Argument(..., help="tenant/namespace"),
    bundle: Optional[str] = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", help=TOPIC_HELP),
    destination: Optional[str] = typer.Option(None, "--destination", "-d",
                                              help="Broker id (host:web port) [the least loaded]"),
) -> None:
    """Move a bundle to another broker; clients follow without a lookup."""
    bundle = _bundle_option(ctx, namespace, bundle, topic)
    query = {"destinationBroker": destination} if destination else None
    call(ctx, lambda c: c.request("PUT", f"namespaces/{namespace_path(namespace)}/{bundle}/unload",
                                   query=query), lambda _: out().print(f"bundle {bundle} moved"))


@namespaces_app.command("split-bundle")
def namespaces_split_bundle(
    ctx: typer.Context,
    namespace: str = typer.Argument(..., help="tenant/namespace"),
    bundle: Optional[str] = typer.Option(None, "--bundle", "-b", help=BUNDLE_HELP),
    topic: Optional[str] = typer.Option(None, "--topic", "-t", help=TOPIC_HELP),
    algorithm: str = typer.Option("range_equally_divide", "--split-algorithm-name",
                                  help="range_equally_divide or topic_count_equally_divide"),
) -> None:
    """Split a bundle in two; its owner keeps both halves and their clients."""
    bundle = _bundle_option(ctx, namespace, bundle, topic)
    call(ctx, lambda c: c.request("PUT", f"namespaces/{namespace_path(namespace)}/{bundle}/split",
                                   query={"splitAlgorithmName": algorithm}),
         lambda _: out().print(f"bundle {bundle} split"))


# -- tenants --------------------------------------------------------------------------------
@tenants_app.command("list")
def tenants_list(ctx: typer.Context) -> None:
    """List the tenants."""
    call(ctx, lambda c: c.tenants(), show_list("Tenant"))


@tenants_app.command("get")
def tenants_get(ctx: typer.Context, tenant: str) -> None:
    """Show a tenant's admin roles and allowed clusters."""
    call(ctx, lambda c: c.tenant(tenant), show_fields)


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
    call(ctx, lambda c: c.create_tenant(tenant, clusters or None, roles), done=f"Created tenant {tenant}")


@tenants_app.command("update")
def tenants_update(
    ctx: typer.Context,
    tenant: str,
    allowed_clusters: Optional[str] = typer.Option(None, "--allowed-clusters", "-c",
                                                   help="Comma-separated clusters [unchanged]"),
    admin_roles: Optional[str] = typer.Option(None, "--admin-roles", "-r", help="Comma-separated roles [unchanged]"),
) -> None:
    """Change a tenant's allowed clusters or admin roles (what is not given stays)."""
    def update(c: AdminClient) -> None:
        info = c.tenant(tenant)
        if allowed_clusters is not None:
            info["allowedClusters"] = [x for x in allowed_clusters.split(",") if x]
        if admin_roles is not None:
            info["adminRoles"] = [x for x in admin_roles.split(",") if x]
        c.request("POST", f"tenants/{tenant}", info)

    call(ctx, update, done=f"Updated tenant {tenant}")


@tenants_app.command("delete")
def tenants_delete(ctx: typer.Context, tenant: str) -> None:
    """Delete a tenant (it must have no namespaces)."""
    call(ctx, lambda c: c.delete_tenant(tenant), done=f"Deleted tenant {tenant}")


# -- namespaces --------------------------------------------------------------------------------
@namespaces_app.command("list")
def namespaces_list(ctx: typer.Context, tenant: str) -> None:
    """List a tenant's namespaces."""
    call(ctx, lambda c: c.namespaces(tenant), show_list("Namespace"))


@namespaces_app.command("create")
def namespaces_create(ctx: typer.Context, namespace: str = typer.Argument(..., help="tenant/namespace"),
                      clusters: Optional[str] = typer.Option(
                          None, "--clusters", "-c",
                          help="Comma-separated replication clusters [the tenant's first allowed one]")) -> None:
    """Create a namespace (replicated between the --clusters regions)."""
    names = [c for c in (clusters or "").split(",") if c]
    call(ctx, lambda c: c.create_namespace(namespace, names or None), done=f"Created namespace {namespace}")


@namespaces_app.command("get-retention")
def namespaces_get_retention(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's retention policy."""
    call(ctx, lambda c: c.retention(namespace) or {}, show_fields)


@namespaces_app.command("permissions")
def namespaces_permissions(ctx: typer.Context, namespace: str) -> None:
    """Show the roles granted actions on a namespace."""
    call(ctx, lambda c: c.permissions(namespace), show_fields)


add_permission_commands(
    namespaces_app, "namespace", lambda c, namespace, role, actions: c.grant_permission(namespace, role, actions),
    lambda c, namespace, role: c.revoke_permission(namespace, role),
    grant_help="Grant a role actions on every topic of a namespace.",
    revoke_help="Take back every action a role was granted on a namespace.",
    revoked="Revoked {role}'s permissions on {name}")


@namespaces_app.command("get-clusters")
def namespaces_get_clusters(ctx: typer.Context, namespace: str) -> None:
    """Show the clusters a namespace replicates between."""
    call(ctx, lambda c: c.replication_clusters(namespace), show_list("Cluster"))


@namespaces_app.command("set-clusters")
def namespaces_set_clusters(ctx: typer.Context, namespace: str,
                            clusters: str = typer.Option(..., "--clusters", "-c",
                                                         help="Comma-separated cluster names")) -> None:
    """Set the clusters a namespace replicates between (each must be allowed by its tenant)."""
    names = [c for c in clusters.split(",") if c]
    call(ctx, lambda c: c.set_replication_clusters(namespace, names),
          done=f"Set replication clusters of {namespace}: {','.join(names)}")


@namespaces_app.command("delete")
def namespaces_delete(ctx: typer.Context, namespace: str,
                      force: bool = typer.Option(False, "--force", "-f", help="Delete its topics too")) -> None:
    """Delete a namespace (it must have no topics, unless --force)."""
    call(ctx, lambda c: c.delete_namespace(namespace, force), done=f"Deleted namespace {namespace}")


@namespaces_app.command("policies")
def namespaces_policies(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's policies."""
    call(ctx, lambda c: c.policies(namespace), show_fields)


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
        raise usage("retention is counted in whole minutes and megabytes: use at least 1m and 1M")
    call(ctx, lambda c: c.set_retention(namespace, minutes, size_mb),
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
        raise usage("the TTL must be >= 0 (0: messages never expire)")
    call(ctx, lambda c: c.set_message_ttl(namespace, seconds), done=f"Message TTL of {namespace}: {seconds} s")


@namespaces_app.command("set-deduplication")
def namespaces_set_deduplication(
    ctx: typer.Context,
    namespace: str,
    enable: bool = typer.Option(..., "--enable/--disable", help="Turn deduplication on or off"),
) -> None:
    """Turn message deduplication on or off for a namespace."""
    call(ctx, lambda c: c.set_deduplication(namespace, enable),
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
    call(ctx, lambda c: c.set_backlog_quota(namespace, quota_type, size, seconds, policy),
          done=f"Backlog quota of {namespace} ({quota_type}): size {size}, time {seconds} s, {policy}")


@namespaces_app.command("get-backlog-quotas")
def namespaces_get_backlog_quotas(ctx: typer.Context, namespace: str) -> None:
    """Show a namespace's backlog quotas by type."""
    call(ctx, lambda c: c.backlog_quotas(namespace), show_fields)


@namespaces_app.command("remove-backlog-quota")
def namespaces_remove_backlog_quota(
    ctx: typer.Context,
    namespace: str,
    quota_type: str = typer.Option("destination_storage", "--type", "-t",
                                   help="destination_storage or message_age"),
) -> None:
    """Remove a namespace's backlog quota of one type."""
    call(ctx, lambda c: c.remove_backlog_quota(namespace, quota_type),
          done=f"Removed the {quota_type} backlog quota of {namespace}")


@namespaces_app.command("get-schema-compatibility-strategy")
def namespaces_get_schema_strategy(ctx: typer.Context, namespace: str) -> None:
    """Show how new schema versions of the namespace's topics are checked (UNDEFINED: the broker's setting)."""
    call(ctx, lambda c: c.request("GET", f"namespaces/{namespace_path(namespace)}/schemaCompatibilityStrategy"),
         show_fields)


@namespaces_app.command("set-schema-compatibility-strategy")
def namespaces_set_schema_strategy(
        ctx: typer.Context, namespace: str,
        strategy: str = typer.Option(..., "--compatibility", "-c",
                                     help="FULL, BACKWARD, FORWARD (each also _TRANSITIVE), ALWAYS_COMPATIBLE, "
                                          "ALWAYS_INCOMPATIBLE or UNDEFINED")) -> None:
    """Set how new schema versions of the namespace's topics are checked."""
    call(ctx, lambda c: c.request("PUT", f"namespaces/{namespace_path(namespace)}/schemaCompatibilityStrategy",
                                   strategy.upper()),
         done=f"Schema compatibility of {namespace}: {strategy.upper()}")


@namespaces_app.command("set-publish-rate")
def namespaces_set_publish_rate(
    ctx: typer.Context, namespace: str,
    msg_rate: int = typer.Option(-1, "--msg-publish-rate", "-m", help="Messages per second per topic; -1: none"),
    byte_rate: int = typer.Option(-1, "--byte-publish-rate", "-b", help="Bytes per second per topic; -1: none"),
) -> None:
    """Slow every topic's producers down to a rate (a topic's own rate wins)."""
    body = {"publishThrottlingRateInMsg": msg_rate, "publishThrottlingRateInByte": byte_rate}
    call(ctx, lambda c: c.request("POST", f"namespaces/{namespace_path(namespace)}/publishRate", body),
         done=f"Publish rate of {namespace}'s topics: {msg_rate} msg/s, {byte_rate} B/s")


@namespaces_app.command("get-publish-rate")
def namespaces_get_publish_rate(ctx: typer.Context, namespace: str) -> None:
    """Show the publish rate of a namespace's topics."""
    call(ctx, lambda c: c.request("GET", f"namespaces/{namespace_path(namespace)}/publishRate") or {}, show_fields)


@namespaces_app.command("remove-publish-rate")
def namespaces_remove_publish_rate(ctx: typer.Context, namespace: str) -> None:
    """Remove the publish rate of a namespace's topics."""
    call(ctx, lambda c: c.request("DELETE", f"namespaces/{namespace_path(namespace)}/publishRate"),
         done=f"Removed the publish rate of {namespace}")
