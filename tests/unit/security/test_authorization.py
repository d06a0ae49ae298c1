"""Pulsar's authorization model: super-users, tenant admins, namespace/topic/subscription grants."""
from __future__ import annotations

import pytest

from magnetar.security import authorization as az
from magnetar.security.authorization import Authorizer, PermissionInputError

T = "persistent://acme/orders/t1"
ON = Authorizer(enabled=True, super_users=frozenset({"root"}))
ACME = {"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]}


def test_super_users_and_tenant_admins_may_everything_in_their_scope():
    for action in ("produce", "consume", "lookup"):
        assert ON.may("root", action, T, None, ACME)
        assert ON.may("acme-admin", action, T, None, ACME)
        assert not ON.may("acme-admin", action, T, None, {"adminRoles": ["other"]})
        assert not ON.may("nobody", action, T, None, ACME)
        assert not ON.may(None, action, T, None, ACME)
    assert ON.is_tenant_admin("acme-admin", ACME) and not ON.is_tenant_admin("acme-admin", {})
    assert ON.is_super_user("root") and not ON.is_super_user("acme-admin")


def test_disabled_authorization_allows_everything():
    off = Authorizer(enabled=False, super_users=frozenset())
    assert off.may(None, "produce", T, None, None) and off.is_super_user(None)


def test_namespace_grants():
    auth = az.grant_namespace(None, "alice", ["consume"])
    assert ON.may("alice", "consume", T, auth, ACME, subscription="s")
    assert ON.may("alice", "lookup", T, auth, ACME)
    assert not ON.may("alice", "produce", T, auth, ACME)
    auth = az.grant_namespace(auth, "alice", ["produce", "consume"])
    assert ON.may("alice", "produce", T, auth, ACME)
    auth = az.revoke_namespace(auth, "alice")
    assert not ON.may("alice", "lookup", T, auth, ACME)


def test_topic_grants_cover_the_topic_and_its_partitions_only():
    auth = az.grant_topic(None, T, "bob", ["produce"])
    assert ON.may("bob", "produce", T, auth, ACME)
    assert ON.may("bob", "produce", T + "-partition-3", auth, ACME)
    assert not ON.may("bob", "produce", "persistent://acme/orders/t2", auth, ACME)
    assert az.topic_permissions(auth, T) == {"bob": ["produce"]}
    auth = az.revoke_topic(auth, T, "bob")
    assert auth["destination_auth"] == {} and not ON.may("bob", "produce", T, auth, ACME)


def test_subscription_roles_restrict_consumers():
    auth = az.grant_namespace(None, "alice", ["consume"])
    auth = az.grant_namespace(auth, "bob", ["consume"])
    auth = az.grant_subscription(auth, "billing", ["bob"])
    assert ON.may("bob", "consume", T, auth, ACME, subscription="billing")
    assert not ON.may("alice", "consume", T, auth, ACME, subscription="billing")
    assert ON.may("alice", "consume", T, auth, ACME, subscription="other")
    auth = az.revoke_subscription(auth, "billing", "bob")
    assert ON.may("alice", "consume", T, auth, ACME, subscription="billing")


def test_policies_body_is_validated():
    body = {"namespace_auth": {"alice": ["produce", "consume"]},
            "destination_auth": {T: {"bob": ["consume"]}},
            "subscription_auth_roles": {"billing": ["bob"]}}
    assert az.validate_auth_policies(body) == {
        "namespace_auth": {"alice": ["consume", "produce"]},
        "destination_auth": {T: {"bob": ["consume"]}},
        "subscription_auth_roles": {"billing": ["bob"]}}
    for bad in ([], {"namespace_auth": {"a": ["fly"]}}, {"destination_auth": {"t1": {}}}, {"other": {}},
                {"namespace_auth": {"": ["produce"]}}, {"subscription_auth_roles": {"s": "bob"}},
                {"namespace_auth": []}):
        with pytest.raises(PermissionInputError):
            az.validate_auth_policies(bad)
    assert az.validate_actions("produce, consume") == ["consume", "produce"]
    with pytest.raises(PermissionInputError, match="unknown actions"):
        az.validate_actions(["produce", "admin"])
