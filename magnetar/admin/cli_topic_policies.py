"""``magnetar admin topics set-/get-/remove-<policy>``: a topic's own
policies (pulsar-admin's names), over its namespace's. ``get-...`` shows the
topic's own value, ``--applied`` the one in force."""
from __future__ import annotations

from typing import Any

import typer

from .cli_support import call, out, parse_duration, parse_size, show_fields, usage
from .cli_topics import topics_app
from .client import topic_path

APPLIED_HELP = "The value in force (the namespace's when the topic sets none)"


def _path(topic: str, suffix: str) -> str:
    return f"{topic_path(topic)}/{suffix}"


def _show(value: Any) -> None:
    if value is None:
        out().print("(not set: the namespace's applies)")
    elif isinstance(value, dict):
        show_fields(value)
    else:
        out().print(str(value))


def _get_and_remove(name: str, suffix: str, what: str) -> None:
    """Register ``get-<name>`` and ``remove-<name>``."""
    def get(ctx: typer.Context, topic: str,
            applied: bool = typer.Option(False, "--applied", help=APPLIED_HELP)) -> None:
        call(ctx, lambda c: c.request("GET", _path(topic, suffix), query={"applied": True} if applied else None),
             _show)

    def remove(ctx: typer.Context, topic: str) -> None:
        call(ctx, lambda c: c.request("DELETE", _path(topic, suffix)), done=f"Removed the {what} of {topic}")

    get.__doc__ = f"Show a topic's {what}."
    remove.__doc__ = f"Remove a topic's own {what} (its namespace's applies again)."
    topics_app.command(f"get-{name}")(get)
    topics_app.command(f"remove-{name}")(remove)


@topics_app.command("set-retention")
def topics_set_retention(
    ctx: typer.Context, topic: str,
    time_: str = typer.Option(..., "--time", "-t", help="How long consumed data is kept: 30m, 12h, 7d; -1: no limit"),
    size: str = typer.Option(..., "--size", "-s", help="How much consumed data is kept: 100M, 10G; -1: no limit"),
) -> None:
    """Keep a topic's consumed messages up to a time and a size, whatever its namespace says."""
    seconds, nbytes = parse_duration(time_, "m"), parse_size(size)
    minutes = -1 if seconds < 0 else seconds // 60
    size_mb = -1 if nbytes < 0 else nbytes // (1024 * 1024)
    if seconds > 0 and minutes == 0 or nbytes > 0 and size_mb == 0:
        raise usage("retention is counted in whole minutes and megabytes: use at least 1m and 1M")
    body = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
    call(ctx, lambda c: c.request("POST", _path(topic, "retention"), body),
         done=f"Retention of {topic}: {minutes} min, {size_mb} MB")


@topics_app.command("set-message-ttl")
def topics_set_message_ttl(ctx: typer.Context, topic: str,
                           ttl: str = typer.Option(..., "--ttl", "-t", help="3600, 1h; 0: never")) -> None:
    """Expire a topic's unacknowledged messages older than a TTL."""
    seconds = parse_duration(ttl)
    if seconds < 0:
        raise usage("the TTL must be >= 0 (0: messages never expire)")
    call(ctx, lambda c: c.request("POST", _path(topic, "messageTTL"), query={"messageTTL": seconds}),
         done=f"Message TTL of {topic}: {seconds} s")


@topics_app.command("set-deduplication")
def topics_set_deduplication(ctx: typer.Context, topic: str,
                             enable: bool = typer.Option(..., "--enable/--disable", help="On or off")) -> None:
    """Turn deduplication on or off for one topic."""
    call(ctx, lambda c: c.request("POST", _path(topic, "deduplicationEnabled"), enable),
         done=f"Deduplication of {topic}: {'on' if enable else 'off'}")


@topics_app.command("set-max-producers")
def topics_set_max_producers(ctx: typer.Context, topic: str,
                             limit: int = typer.Option(..., "--max-producers", "-p", min=0, help="0: no limit")) -> None:
    """Admit at most this many producers on a topic (each partition, for a partitioned one)."""
    call(ctx, lambda c: c.request("POST", _path(topic, "maxProducers"), limit),
         done=f"Max producers of {topic}: {limit}")


@topics_app.command("set-max-consumers")
def topics_set_max_consumers(ctx: typer.Context, topic: str,
                             limit: int = typer.Option(..., "--max-consumers", "-c", min=0, help="0: no limit")) -> None:
    """Admit at most this many consumers on a topic, all subscriptions together."""
    call(ctx, lambda c: c.request("POST", _path(topic, "maxConsumers"), limit),
         done=f"Max consumers of {topic}: {limit}")


@topics_app.command("set-publish-rate")
def topics_set_publish_rate(
    ctx: typer.Context, topic: str,
    msg_rate: int = typer.Option(-1, "--msg-publish-rate", "-m", help="Messages per second; -1: no limit"),
    byte_rate: int = typer.Option(-1, "--byte-publish-rate", "-b", help="Bytes per second; -1: no limit"),
) -> None:
    """Slow a topic's producers down to a rate (their connections pause; nothing fails)."""
    body = {"publishThrottlingRateInMsg": msg_rate, "publishThrottlingRateInByte": byte_rate}
    call(ctx, lambda c: c.request("POST", _path(topic, "publishRate"), body),
         done=f"Publish rate of {topic}: {msg_rate} msg/s, {byte_rate} B/s")


@topics_app.command("set-backlog-quota")
def topics_set_backlog_quota(
    ctx: typer.Context, topic: str,
    policy: str = typer.Option(..., "--policy", "-p",
                               help="producer_request_hold, producer_exception or consumer_backlog_eviction"),
    limit_size: str = typer.Option("-1", "--limit-size", "-l", help="Backlog size limit: 500M, 10G; -1: none"),
    limit_time: str = typer.Option("0", "--limit-time", "--lt", help="Backlog age limit: 30m, 1h; 0: none"),
    quota_type: str = typer.Option("destination_storage", "--type", "-t",
                                   help="destination_storage (size) or message_age (time)"),
) -> None:
    """Limit how much one topic may hold for its slowest subscription."""
    body = {"limitSize": parse_size(limit_size), "limitTime": parse_duration(limit_time), "policy": policy}
    call(ctx, lambda c: c.request("POST", _path(topic, "backlogQuota"), body, query={"backlogQuotaType": quota_type}),
         done=f"Backlog quota of {topic} ({quota_type}): {body}")


@topics_app.command("get-backlog-quotas")
def topics_get_backlog_quotas(ctx: typer.Context, topic: str,
                              applied: bool = typer.Option(False, "--applied", help=APPLIED_HELP)) -> None:
    """Show a topic's backlog quotas by type."""
    call(ctx, lambda c: c.request("GET", _path(topic, "backlogQuotaMap"), query={"applied": True} if applied else None),
         show_fields)


@topics_app.command("remove-backlog-quota")
def topics_remove_backlog_quota(ctx: typer.Context, topic: str,
                                quota_type: str = typer.Option("destination_storage", "--type", "-t")) -> None:
    """Remove a topic's own backlog quota of one type."""
    call(ctx, lambda c: c.request("DELETE", _path(topic, "backlogQuota"), query={"backlogQuotaType": quota_type}),
         done=f"Removed the {quota_type} backlog quota of {topic}")


for _name, _suffix, _what in (("retention", "retention", "retention policy"),
                              ("message-ttl", "messageTTL", "message TTL"),
                              ("deduplication", "deduplicationEnabled", "deduplication switch"),
                              ("max-producers", "maxProducers", "producer limit"),
                              ("max-consumers", "maxConsumers", "consumer limit"),
                              ("publish-rate", "publishRate", "publish rate")):
    _get_and_remove(_name, _suffix, _what)
