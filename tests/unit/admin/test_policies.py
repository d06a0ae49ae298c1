"""Validation of namespace policies, and what stored policies mean to storage."""
from __future__ import annotations

import math

import pytest

from magnetar.broker.namespaces import policies
from magnetar.broker.namespaces.resources import Forbidden, InvalidInput, PreconditionFailed
from magnetar.storage import RetentionPolicy


@pytest.mark.parametrize("body", [
    {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0},
    {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1},
    {"retentionTimeInMinutes": 10, "retentionSizeInMB": -1},
    {"retentionTimeInMinutes": -1, "retentionSizeInMB": 100},
    {"retentionTimeInMinutes": 10, "retentionSizeInMB": 100},
])
def test_valid_retention(body):
    assert policies.validate_retention(body) == body


@pytest.mark.parametrize("body", [
    {"retentionTimeInMinutes": 10, "retentionSizeInMB": 0},
    {"retentionTimeInMinutes": 0, "retentionSizeInMB": -1},
    {"retentionTimeInMinutes": -2, "retentionSizeInMB": 1},
    {"retentionTimeInMinutes": 1.5, "retentionSizeInMB": 1},
    {"retentionTimeInMinutes": True, "retentionSizeInMB": 1},
    {"retentionTimeInMinutes": 1},
    {"retentionTimeInMinutes": 1, "retentionSizeInMB": 1, "x": 1},
    None, 5, "60m", [1, 1],
])
def test_invalid_retention(body):
    with pytest.raises(InvalidInput):
        policies.validate_retention(body)


def test_scalar_policies():
    assert policies.validate_message_ttl(0) == 0 and policies.validate_message_ttl(3600) == 3600
    for bad in (-1, 1.5, "10", True, None):
        with pytest.raises(InvalidInput):
            policies.validate_message_ttl(bad)
    assert policies.validate_deduplication(False) is False
    for bad in (0, "true", None):
        with pytest.raises(InvalidInput):
            policies.validate_deduplication(bad)


def test_backlog_quota():
    assert policies.validate_backlog_quota({"limit": 10}) == {
        "limitSize": 10, "limitTime": -1, "policy": "producer_request_hold"}
    for bad in ({"policy": "drop"}, {"limitSize": -5}, {"limitTime": "1h"}, {"other": 1}, []):
        with pytest.raises(InvalidInput):
            policies.validate_backlog_quota(bad)
    assert policies.validate_backlog_quota_type(None) == "destination_storage"
    with pytest.raises(InvalidInput):
        policies.validate_backlog_quota_type("bytes")


def test_replication_clusters():
    assert policies.validate_replication_clusters(["b", "a", "a"], ["a", "b"], ["a", "b"]) == ["a", "b"]
    with pytest.raises(PreconditionFailed, match="do not exist"):
        policies.validate_replication_clusters(["c"], ["a"], ["a"])
    with pytest.raises(Forbidden, match=r"Cluster \[b\] is not in the list of allowed clusters list for tenant \[t\]"):
        policies.validate_replication_clusters(["b"], ["a", "b"], ["a"], "t")
    with pytest.raises(InvalidInput):
        policies.validate_replication_clusters([], ["a"], ["a"])


def test_create_body_keeps_known_fields_only():
    body = {"message_ttl_in_seconds": 5, "bundles": {"numBundles": 4}, "deduplicationEnabled": None}
    assert policies.validate_policies(body, ["a"], ["a"]) == {"message_ttl_in_seconds": 5}
    with pytest.raises(InvalidInput):
        policies.validate_policies({"message_ttl_in_seconds": -1}, ["a"], ["a"])


def test_retention_maps_to_storage():
    def rp(t, s):
        return policies.retention_policy({"retention_policies": {"retentionTimeInMinutes": t, "retentionSizeInMB": s}})

    assert policies.retention_policy({"retention_policies": None}) is None
    assert policies.retention_policy({}) is None
    assert rp(0, 0) == RetentionPolicy(0, 0)
    assert rp(-1, -1) == RetentionPolicy(math.inf, math.inf)
    assert rp(90, -1) == RetentionPolicy(5400.0, math.inf)
    assert rp(-1, 2) == RetentionPolicy(math.inf, 2 * 1024 * 1024)


def test_message_ttl_meaning():
    assert policies.message_ttl_s({"message_ttl_in_seconds": 30}) == 30
    assert policies.message_ttl_s({"message_ttl_in_seconds": 0}) is None
    assert policies.message_ttl_s({"message_ttl_in_seconds": None}) is None
