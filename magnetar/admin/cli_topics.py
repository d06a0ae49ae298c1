"""``magnetar admin topics ...`` and ``magnetar admin schemas ...``: topics,
partitioned topics, their subscriptions and schemas (pulsar-admin's names)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from magnetar.protocol import ProtocolError

from .client import AdminApiError, AdminClient
from .cli_support import (Settings, add_permission_commands, call, out, parse_duration, show_fields, show_list,
                          show_stats, usage)
from .messages import messages_of

topics_app = typer.Typer(help="Topics, partitioned topics and subscriptions.", no_args_is_help=True)
schemas_app = typer.Typer(help="Topics' schemas and their versions.", no_args_is_help=True)


# -- topics --------------------------------------------------------------------------------------
@topics_app.command("list")
def topics_list(ctx: typer.Context, namespace: str) -> None:
    """List a namespace's topics (partitions included)."""
    call(ctx, lambda c: c.topics(namespace), show_list("Topic"))


@topics_app.command("list-partitioned-topics")
def topics_list_partitioned(ctx: typer.Context, namespace: str) -> None:
    """List a namespace's partitioned topics."""
    call(ctx, lambda c: c.partitioned_topics(namespace), show_list("Partitioned topic"))


@topics_app.command("create")
def topics_create(ctx: typer.Context, topic: str) -> None:
    """Create a non-partitioned topic."""
    call(ctx, lambda c: c.create_topic(topic), done=f"Created topic {topic}")


@topics_app.command("delete")
def topics_delete(ctx: typer.Context, topic: str,
                  force: bool = typer.Option(False, "--force", "-f", help="Even with producers or consumers")) -> None:
    """Delete a topic with its subscriptions and data."""
    call(ctx, lambda c: c.delete_topic(topic, force), done=f"Deleted topic {topic}")


@topics_app.command("create-partitioned-topic")
def topics_create_partitioned(ctx: typer.Context, topic: str,
                              partitions: int = typer.Option(..., "--partitions", "-p")) -> None:
    """Create a partitioned topic."""
    call(ctx, lambda c: c.create_partitioned_topic(topic, partitions),
          done=f"Created {topic} with {partitions} partitions")


@topics_app.command("update-partitioned-topic")
def topics_update_partitioned(ctx: typer.Context, topic: str,
                              partitions: int = typer.Option(..., "--partitions", "-p")) -> None:
    """Grow a partitioned topic (partitions are only ever added)."""
    call(ctx, lambda c: c.update_partitioned_topic(topic, partitions),
          done=f"{topic} now has {partitions} partitions")


@topics_app.command("get-partitioned-topic-metadata")
def topics_partitioned_metadata(ctx: typer.Context, topic: str) -> None:
    """Show a topic's partition count (0: not partitioned)."""
    call(ctx, lambda c: c.partitioned_topic_metadata(topic), show_fields)


@topics_app.command("delete-partitioned-topic")
def topics_delete_partitioned(ctx: typer.Context, topic: str,
                              force: bool = typer.Option(False, "--force", "-f")) -> None:
    """Delete a partitioned topic and all its partitions."""
    call(ctx, lambda c: c.delete_partitioned_topic(topic, force), done=f"Deleted partitioned topic {topic}")


@schemas_app.command("get")
def schemas_get(ctx: typer.Context, topic: str,
                version: Optional[int] = typer.Option(None, "--version", help="A version [the latest]")) -> None:
    """Show a topic's schema."""
    call(ctx, lambda c: c.schema(topic, version), show_fields)


@schemas_app.command("upload")
def schemas_upload(ctx: typer.Context, topic: str,
                   filename: Path = typer.Option(..., "--filename", "-f",
                                                 help='JSON {"type": "AVRO", "schema": "...", "properties": {}}')) -> None:
    """Register a schema version (refused if incompatible)."""
    try:
        payload = json.loads(filename.read_text())
    except (OSError, ValueError) as exc:
        raise usage(f"cannot read a schema payload from {filename}: {exc}")
    call(ctx, lambda c: c.upload_schema(topic, payload), show_fields)


@schemas_app.command("delete")
def schemas_delete(ctx: typer.Context, topic: str) -> None:
    """Delete every version of a topic's schema."""
    call(ctx, lambda c: c.delete_schema(topic), done=f"Deleted the schema of {topic}")


@topics_app.command("last-message-id")
def topics_last_message_id(ctx: typer.Context, topic: str) -> None:
    """Show the id of the topic's last message."""
    call(ctx, lambda c: c.last_message_id(topic), show_fields)


@topics_app.command("peek-messages")
def topics_peek_messages(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    count: int = typer.Option(1, "--count", "-n", help="Entries to peek at, from the first unacknowledged"),
) -> None:
    """Show the next messages of a subscription's backlog without consuming them."""
    if count < 1:
        raise usage("--count must be at least 1")

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
            show_fields({k: v for k, v in msg.items() if v not in (None, {})})

    call(ctx, peek, render)


def _show_messages(ctx: typer.Context, fetch) -> None:
    """Call ``fetch(client) -> (raw, headers)`` and print the entry's messages (a batch split)."""
    def read(c: AdminClient) -> list[dict]:
        raw, headers = fetch(c)
        try:
            return messages_of(raw, headers)
        except ProtocolError as exc:
            raise AdminApiError(422, f"the entry cannot be split into messages: {exc}", "GET", "") from None

    def render(messages: list[dict]) -> None:
        for msg in messages:
            show_fields({k: v for k, v in msg.items() if v not in (None, {})})

    call(ctx, read, render)


@topics_app.command("get-message-by-id")
def topics_get_message_by_id(
    ctx: typer.Context,
    topic: str,
    ledger_id: int = typer.Option(..., "--ledger-id", "-l", min=0, help="The message id's ledger"),
    entry_id: int = typer.Option(..., "--entry-id", "-e", min=0, help="The message id's entry"),
) -> None:
    """Show the message stored at ledger:entry (every message of a batch)."""
    _show_messages(ctx, lambda c: c.message_by_id(topic, ledger_id, entry_id))


@topics_app.command("examine-message")
def topics_examine_message(
    ctx: typer.Context,
    topic: str,
    initial_position: str = typer.Option("latest", "--initial-position", "-i", help="earliest or latest"),
    message_position: int = typer.Option(1, "--message-position", "-m", min=1,
                                         help="The n-th entry from there, from 1"),
) -> None:
    """Show the n-th stored entry from the start or the end, without a subscription."""
    if initial_position.lower() not in ("earliest", "latest"):
        raise usage("--initial-position must be earliest or latest")
    _show_messages(ctx, lambda c: c.examine_message(topic, initial_position.lower(), message_position))


@topics_app.command("compact")
def topics_compact(ctx: typer.Context, topic: str) -> None:
    """Start compacting a topic (the latest value per key); see compaction-status."""
    call(ctx, lambda c: c.compact(topic), done=f"Compaction of {topic} started")


@topics_app.command("compaction-status")
def topics_compaction_status(ctx: typer.Context, topic: str) -> None:
    """Show the state of the topic's last compaction."""
    call(ctx, lambda c: c.compaction_status(topic), show_fields)


@topics_app.command("permissions")
def topics_permissions(ctx: typer.Context, topic: str) -> None:
    """Show every role's actions on a topic (its namespace's grants and its own)."""
    call(ctx, lambda c: c.topic_permissions(topic), show_fields)


add_permission_commands(
    topics_app, "topic", lambda c, topic, role, actions: c.grant_topic_permission(topic, role, actions),
    lambda c, topic, role: c.revoke_topic_permission(topic, role),
    grant_help="Grant a role actions on one topic.",
    revoke_help="Take back a role's grant on one topic (its namespace's grants stay).",
    revoked="Revoked {role}'s grant on {name}")


@topics_app.command("get-replication-clusters")
def topics_get_replication_clusters(
        ctx: typer.Context, topic: str,
        applied: bool = typer.Option(False, "--applied", help="The clusters in effect (the namespace's if unset)")) -> None:
    """Show the clusters a topic replicates between (its own setting)."""
    call(ctx, lambda c: c.topic_replication_clusters(topic, applied), show_list("Cluster"))


@topics_app.command("set-replication-clusters")
def topics_set_replication_clusters(ctx: typer.Context, topic: str,
                                    clusters: str = typer.Option(..., "--clusters", "-c",
                                                                 help="Comma-separated cluster names")) -> None:
    """Replicate a topic between these clusters, whatever its namespace says."""
    names = [c for c in clusters.split(",") if c]
    call(ctx, lambda c: c.set_topic_replication_clusters(topic, names),
          done=f"Set replication clusters of {topic}: {','.join(names)}")


@topics_app.command("remove-replication-clusters")
def topics_remove_replication_clusters(ctx: typer.Context, topic: str) -> None:
    """Drop a topic's own replication clusters: its namespace's apply again."""
    call(ctx, lambda c: c.remove_topic_replication_clusters(topic), done=f"Removed replication clusters of {topic}")


@topics_app.command("stats")
def topics_stats(ctx: typer.Context, topic: str) -> None:
    """Show a topic's stats."""
    call(ctx, lambda c: c.stats(topic), show_stats)


@topics_app.command("partitioned-stats")
def topics_partitioned_stats(ctx: typer.Context, topic: str) -> None:
    """Show a partitioned topic's stats, summed over its partitions."""
    call(ctx, lambda c: c.partitioned_stats(topic), show_stats)


@topics_app.command("stats-internal")
def topics_stats_internal(ctx: typer.Context, topic: str) -> None:
    """Show a topic's storage: ledgers, cursors, properties."""
    call(ctx, lambda c: c.internal_stats(topic), show_fields)


@topics_app.command("unload")
def topics_unload(ctx: typer.Context, topic: str) -> None:
    """Unload a topic (clients reconnect; it is reloaded on demand)."""
    call(ctx, lambda c: c.unload(topic), done=f"Unloaded {topic}")


@topics_app.command("terminate")
def topics_terminate(ctx: typer.Context, topic: str) -> None:
    """Terminate a topic: no more messages can be published to it."""
    call(ctx, lambda c: c.terminate(topic),
          lambda mid: out().print(f"Terminated {escape(topic)} at {mid['ledgerId']}:{mid['entryId']}"))


@topics_app.command("subscriptions")
def topics_subscriptions(ctx: typer.Context, topic: str) -> None:
    """List a topic's subscriptions."""
    call(ctx, lambda c: c.subscriptions(topic), show_list("Subscription"))


@topics_app.command("create-subscription")
def topics_create_subscription(
    ctx: typer.Context,
    topic: str,
    subscription: str = typer.Option(..., "--subscription", "-s"),
    message_id: str = typer.Option("latest", "--message-id", "-m", help="earliest, latest or ledger:entry"),
) -> None:
    """Create a durable subscription at a position."""
    call(ctx, lambda c: c.create_subscription(topic, subscription, message_id),
          done=f"Created subscription {subscription} on {topic}")


@topics_app.command("unsubscribe")
def topics_unsubscribe(ctx: typer.Context, topic: str, subscription: str = typer.Option(..., "--subscription", "-s"),
                       force: bool = typer.Option(False, "--force", "-f", help="Even with connected consumers")) -> None:
    """Delete a subscription."""
    call(ctx, lambda c: c.delete_subscription(topic, subscription, force),
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
        raise usage("give exactly one of --time, --timestamp or --message-id")
    if message_id is not None:
        call(ctx, lambda c: c.reset_cursor_to_message(topic, subscription, message_id),
              done=f"Reset {subscription} to {message_id}")
        return
    if timestamp is None:
        seconds = parse_duration(time_, "m")
        if seconds < 0:
            raise usage("--time must be a duration >= 0")
        timestamp = int(time.time() * 1000) - seconds * 1000
    call(ctx, lambda c: c.reset_cursor_to_time(topic, subscription, timestamp),
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
        raise usage("give either --count N or --all")
    if all_:
        call(ctx, lambda c: c.skip_all(topic, subscription), done=f"Cleared the backlog of {subscription}")
        return
    if count < 1:
        raise usage("--count must be at least 1")

    def skip_and_count(c: AdminClient) -> int | None:
        # The REST answer is empty (Pulsar's): say what really moved from the backlog.
        before = c.stats(topic)["subscriptions"].get(subscription, {}).get("msgBacklog")
        c.skip(topic, subscription, count)
        after = c.stats(topic)["subscriptions"].get(subscription, {}).get("msgBacklog")
        return None if before is None or after is None else max(0, before - after)

    settings: Settings = ctx.obj
    skipped: list = []
    call(ctx, lambda c: skipped.append(skip_and_count(c)))
    if not settings.json:
        n = skipped[0] if skipped and skipped[0] is not None else count
        note = "" if n >= count else f" (the backlog held {n})"
        out().print(f"Skipped {n} entries of {subscription}{note}")


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
        raise usage("--expire-time must be >= 0")
    call(ctx, lambda c: c.expire_messages(topic, subscription, seconds),
          done=f"Expired messages of {subscription} older than {seconds} s")
