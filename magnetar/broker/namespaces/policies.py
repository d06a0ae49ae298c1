"""Namespace policies: checking what an operator sends, and what the stored
policies mean to the broker.

The ``validate_*`` functions take a decoded JSON body and return the value to
store (Pulsar's shape and field names), or raise
:class:`~.resources.InvalidInput` with the reason; they do no I/O, so a
refused request has changed nothing. The other functions read a stored
policies document (:func:`~.resources.namespace_policies`) for the features
that enforce it: retention (storage trimming), message TTL (the expiry
task) and backlog quotas (:mod:`.backlog_quota`). Deduplication is read by
the deduplication feature itself.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from magnetar.security import authorization
from magnetar.storage import RetentionPolicy
from magnetar.storage.config import STORAGE_PROFILES

from .resources import POLICY_FIELDS, Forbidden, InvalidInput, PreconditionFailed

#: Pulsar's backlog quota types and retention policies on exceeding them.
BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
BACKLOG_QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(name: str, value: Any, low: int) -> int:
    if not _is_int(value) or value < low:
        raise InvalidInput(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def validate_retention(body: Any) -> dict:
    """``{"retentionTimeInMinutes": t, "retentionSizeInMB": s}``; -1 = no limit.

    As in Pulsar, both must be 0 (no retention) or both non-zero: a single 0
    next to a real limit would delete everything at once, which is never
    what was meant (use -1 to ignore one limit).
    """
    if not isinstance(body, dict):
        raise InvalidInput("retention must be a JSON object {retentionTimeInMinutes, retentionSizeInMB}")
    unknown = set(body) - {"retentionTimeInMinutes", "retentionSizeInMB"}
    if unknown:
        raise InvalidInput(f"unknown retention fields: {', '.join(sorted(unknown))}")
    if "retentionTimeInMinutes" not in body or "retentionSizeInMB" not in body:
        raise InvalidInput("retention needs both retentionTimeInMinutes and retentionSizeInMB (-1: no limit)")
    minutes = _int_at_least("retentionTimeInMinutes", body["retentionTimeInMinutes"], -1)
    size_mb = _int_at_least("retentionSizeInMB", body["retentionSizeInMB"], -1)
    if (minutes == 0) != (size_mb == 0):
        raise InvalidInput(
            "Invalid retention policy: setting a single time or size limit to 0 is invalid when the other "
            "is not 0. Use -1 to ignore a limit; set both to 0 to disable retention."
        )
    return {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}


def validate_publish_rate(body: Any) -> dict:
    """Pulsar's PublishRate: ``{"publishThrottlingRateInMsg": n, "publishThrottlingRateInByte": n}``
    (-1 or 0: that one is not limited)."""
    if not isinstance(body, dict) or set(body) - {"publishThrottlingRateInMsg", "publishThrottlingRateInByte"}:
        raise InvalidInput("publish rate must be {publishThrottlingRateInMsg, publishThrottlingRateInByte}")
    out = {}
    for key in ("publishThrottlingRateInMsg", "publishThrottlingRateInByte"):
        value = body.get(key, -1)
        if not _is_int(value) or value < -1:
            raise InvalidInput(f"{key} must be an integer >= -1 (-1: no limit), got {value!r}")
        out[key] = value
    return out


#: Pulsar's DispatchRate fields, with the values Pulsar gives the ones a body leaves out.
DISPATCH_RATE_DEFAULTS = {"dispatchThrottlingRateInMsg": -1, "dispatchThrottlingRateInByte": -1,
                          "ratePeriodInSecond": 1, "relativeToPublishRate": False}


def validate_dispatch_rate(body: Any) -> dict:
    """Pulsar's DispatchRate (``dispatchRate`` and ``subscriptionDispatchRate``):
    ``{"dispatchThrottlingRateInMsg": n, "dispatchThrottlingRateInByte": n,
    "ratePeriodInSecond": p, "relativeToPublishRate": false}``: at most ``n``
    messages / bytes every ``p`` seconds (-1 or 0: that one is not limited).
    A rate relative to the publish rate is refused (not supported)."""
    if not isinstance(body, dict) or set(body) - set(DISPATCH_RATE_DEFAULTS):
        raise InvalidInput("dispatch rate must be {dispatchThrottlingRateInMsg, dispatchThrottlingRateInByte, "
                           "ratePeriodInSecond, relativeToPublishRate}")
    out = {**DISPATCH_RATE_DEFAULTS, **body}
    for key in ("dispatchThrottlingRateInMsg", "dispatchThrottlingRateInByte"):
        if not _is_int(out[key]) or out[key] < -1:
            raise InvalidInput(f"{key} must be an integer >= -1 (-1: no limit), got {out[key]!r}")
    _int_at_least("ratePeriodInSecond", out["ratePeriodInSecond"], 1)
    if out["relativeToPublishRate"] is not False:
        raise InvalidInput("relativeToPublishRate is not supported: give the rate in messages or bytes")
    return out


def validate_limit(what: str, body: Any) -> int:
    """A producer or consumer count limit: an integer >= 0 (0: no limit)."""
    return _int_at_least(what, body, 0)


def validate_message_ttl(body: Any) -> int:
    """Seconds a message may wait unacknowledged; 0 disables expiry."""
    return _int_at_least("message TTL (seconds)", body, 0)


def validate_deduplication(body: Any) -> bool:
    if not isinstance(body, bool):
        raise InvalidInput(f"deduplication must be true or false, got {body!r}")
    return body


def validate_backlog_quota(body: Any) -> dict:
    """``{"limitSize": bytes, "limitTime": seconds, "policy": ...}`` (-1: no limit).

    Pulsar's deprecated ``limit`` is read as ``limitSize``. Which limit a
    quota enforces depends on its type (:func:`backlog_quotas`).
    """
    if not isinstance(body, dict):
        raise InvalidInput("backlog quota must be a JSON object {limitSize, limitTime, policy}")
    unknown = set(body) - {"limit", "limitSize", "limitTime", "policy"}
    if unknown:
        raise InvalidInput(f"unknown backlog quota fields: {', '.join(sorted(unknown))}")
    size = _int_at_least("limitSize", body.get("limitSize", body.get("limit", -1)), -1)
    seconds = _int_at_least("limitTime", body.get("limitTime", -1), -1)
    policy = body.get("policy", "producer_request_hold")
    if policy not in BACKLOG_QUOTA_POLICIES:
        raise InvalidInput(f"backlog quota policy must be one of {', '.join(BACKLOG_QUOTA_POLICIES)}")
    return {"limitSize": size, "limitTime": seconds, "policy": policy}


def validate_backlog_quota_type(value: str | None) -> str:
    value = value or "destination_storage"
    if value not in BACKLOG_QUOTA_TYPES:
        raise InvalidInput(f"backlogQuotaType must be one of {', '.join(BACKLOG_QUOTA_TYPES)}")
    return value


def validate_replication_clusters(body: Any, known: list[str], allowed: list[str], tenant: str = "") -> list[str]:
    """A non-empty list of clusters that exist (else PreconditionFailed, 412)
    and the tenant may use (its ``allowedClusters``; else Forbidden, 403, with
    Pulsar's message)."""
    if not isinstance(body, list) or not body or not all(isinstance(c, str) for c in body):
        raise InvalidInput("replication clusters must be a non-empty JSON list of cluster names")
    missing = sorted(set(body) - set(known))
    if missing:
        raise PreconditionFailed(f"Clusters do not exist: {', '.join(missing)}")
    refused = sorted(set(body) - set(allowed))
    if refused:
        raise Forbidden(f"Cluster [{', '.join(refused)}] is not in the list of allowed clusters list "
                        f"for tenant [{tenant}]")
    return sorted(set(body))


#: Pulsar's SchemaCompatibilityStrategy names (UNDEFINED: the broker's setting applies).
SCHEMA_STRATEGIES = ("UNDEFINED", "ALWAYS_INCOMPATIBLE", "ALWAYS_COMPATIBLE", "BACKWARD", "FORWARD", "FULL",
                     "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE")


def validate_schema_strategy(body: Any) -> str:
    if not isinstance(body, str) or body.upper() not in SCHEMA_STRATEGIES:
        raise InvalidInput(f"schema compatibility strategy must be one of {', '.join(SCHEMA_STRATEGIES)}, "
                           f"got {body!r}")
    return body.upper()


def validate_storage_profile(body: Any) -> str:
    """How an object-storage broker commits the namespace's entries:
    ``"latency"`` (at once) or ``"cost"`` (gathered up to an interval)."""
    if body not in STORAGE_PROFILES:
        raise InvalidInput(f"storage profile must be one of {', '.join(STORAGE_PROFILES)}, got {body!r}")
    return body


def validate_policies(body: Any, known: list[str], allowed: list[str], tenant: str = "") -> dict:
    """The optional Policies body of namespace creation: the fields Magnetar
    keeps are checked; others (Pulsar has many) are ignored."""
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise InvalidInput("namespace policies must be a JSON object")
    out: dict = {}
    if body.get("replication_clusters") is not None:
        out["replication_clusters"] = validate_replication_clusters(body["replication_clusters"], known, allowed, tenant)
    if body.get("retention_policies") is not None:
        out["retention_policies"] = validate_retention(body["retention_policies"])
    if body.get("message_ttl_in_seconds") is not None:
        out["message_ttl_in_seconds"] = validate_message_ttl(body["message_ttl_in_seconds"])
    if body.get("deduplicationEnabled") is not None:
        out["deduplicationEnabled"] = validate_deduplication(body["deduplicationEnabled"])
    quotas = body.get("backlog_quota_map")
    if quotas is not None:
        if not isinstance(quotas, dict):
            raise InvalidInput("backlog_quota_map must be a JSON object")
        out["backlog_quota_map"] = {validate_backlog_quota_type(k): validate_backlog_quota(v)
                                    for k, v in quotas.items()}
    if body.get("schema_compatibility_strategy") is not None:
        out["schema_compatibility_strategy"] = validate_schema_strategy(body["schema_compatibility_strategy"])
    if body.get("storage_profile") is not None:
        out["storage_profile"] = validate_storage_profile(body["storage_profile"])
    if body.get("auth_policies") is not None:
        try:
            out["auth_policies"] = authorization.validate_auth_policies(body["auth_policies"])
        except authorization.PermissionInputError as exc:
            raise InvalidInput(str(exc)) from None
    assert set(out) <= set(POLICY_FIELDS)
    return out


# -- what stored policies mean ------------------------------------------------------
def retention_policy(policies: dict) -> RetentionPolicy | None:
    """The storage retention override for a namespace's topics.

    None when the namespace sets no retention (the broker's ``[storage]``
    settings apply). -1 (no limit) becomes ``math.inf``.
    """
    retention = policies.get("retention_policies")
    if not isinstance(retention, dict):
        return None
    minutes = retention.get("retentionTimeInMinutes", 0)
    size_mb = retention.get("retentionSizeInMB", 0)
    return RetentionPolicy(
        math.inf if minutes < 0 else minutes * 60.0,
        math.inf if size_mb < 0 else size_mb * 1024 * 1024,
    )


def message_ttl_s(policies: dict) -> int | None:
    """The namespace's message TTL in seconds; None when unset or 0 (no expiry)."""
    ttl = policies.get("message_ttl_in_seconds")
    return ttl if _is_int(ttl) and ttl > 0 else None


@dataclass(frozen=True, slots=True)
class BacklogQuota:
    """One enforced backlog quota: ``limit`` is bytes for ``destination_storage``
    and seconds for ``message_age``; ``policy`` is one of
    :data:`BACKLOG_QUOTA_POLICIES`."""

    kind: str
    limit: int
    policy: str


def backlog_quotas(policies: dict) -> tuple[BacklogQuota, ...]:
    """The namespace's backlog quotas that have a limit, size quota first.

    As in Pulsar, the quota type picks the field: ``destination_storage``
    enforces ``limitSize``, ``message_age`` enforces ``limitTime``; the other
    field of the entry is ignored. -1 (no limit) drops the quota, and so does
    a ``limitTime`` of 0 (Pulsar does not enforce it either).
    """
    stored = policies.get("backlog_quota_map")
    if not isinstance(stored, dict):
        return ()
    out = []
    for kind, field in (("destination_storage", "limitSize"), ("message_age", "limitTime")):
        quota = stored.get(kind)
        if not isinstance(quota, dict):
            continue
        limit = quota.get(field, -1)
        policy = quota.get("policy", "producer_request_hold")
        lowest = 0 if kind == "destination_storage" else 1
        if _is_int(limit) and limit >= lowest and policy in BACKLOG_QUOTA_POLICIES:
            out.append(BacklogQuota(kind, limit, policy))
    return tuple(out)
