"""Pulsar's authorization model, as pure functions over stored policies.

Who may do what:

- a **super-user** role (``super_user_roles``) may do everything;
- a **tenant admin** (a role in the tenant's ``adminRoles``) may do
  everything within that tenant: manage its namespaces and topics, produce,
  consume;
- any other role needs a **permission**: an action granted to it on the
  namespace (``auth_policies.namespace_auth``) or on the topic
  (``auth_policies.destination_auth``, keyed by the full topic name; a
  partition inherits its partitioned topic's grants);
- consuming also passes the **subscription** check: when
  ``auth_policies.subscription_auth_roles`` lists roles for a subscription,
  only those roles may use it;
- a lookup is allowed to a role that may produce or consume.

The ``auth_policies`` object has Pulsar's JSON layout and lives in the
namespace policies document in the metadata store::

    {"namespace_auth": {"alice": ["consume", "produce"]},
     "destination_auth": {"persistent://acme/orders/t1": {"bob": ["consume"]}},
     "subscription_auth_roles": {"billing": ["bob"]}}

Editing helpers return a new object (the store writes it with
compare-and-set) and raise :class:`PermissionInputError` for malformed input.
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Iterable

#: Pulsar's AuthAction values.
ACTIONS = ("produce", "consume", "functions", "sources", "sinks", "packages")
EMPTY_AUTH_POLICIES = {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}}
_PARTITION = re.compile(r"^(.*)-partition-\d+$")


class PermissionInputError(ValueError):
    """A permission request names an unknown action or has the wrong shape."""


def validate_actions(body: Any) -> list[str]:
    """A list of known action names, sorted and unique."""
    if isinstance(body, str):
        body = [a.strip() for a in body.split(",") if a.strip()]
    if not isinstance(body, (list, tuple, set)) or not all(isinstance(a, str) for a in body):
        raise PermissionInputError(f"actions must be a list of {', '.join(ACTIONS)}")
    unknown = sorted(set(body) - set(ACTIONS))
    if unknown:
        raise PermissionInputError(f"unknown actions {', '.join(unknown)}; known: {', '.join(ACTIONS)}")
    return sorted(set(body))


def validate_role(role: Any) -> str:
    if not isinstance(role, str) or not role.strip() or len(role) > 1024:
        raise PermissionInputError("a role is a non-empty name")
    return role


def validate_auth_policies(body: Any) -> dict:
    """Pulsar's AuthPolicies object (from a namespace policies body), checked."""
    if body is None:
        return copy.deepcopy(EMPTY_AUTH_POLICIES)
    if not isinstance(body, dict):
        raise PermissionInputError("auth_policies must be a JSON object")
    unknown = set(body) - set(EMPTY_AUTH_POLICIES)
    if unknown:
        raise PermissionInputError(f"unknown auth_policies fields: {', '.join(sorted(unknown))}")
    out = copy.deepcopy(EMPTY_AUTH_POLICIES)
    for role, actions in _object(body.get("namespace_auth"), "namespace_auth").items():
        out["namespace_auth"][validate_role(role)] = validate_actions(actions)
    for topic, grants in _object(body.get("destination_auth"), "destination_auth").items():
        if not isinstance(topic, str) or "://" not in topic:
            raise PermissionInputError(f"destination_auth keys are full topic names, got {topic!r}")
        out["destination_auth"][topic] = {validate_role(r): validate_actions(a)
                                          for r, a in _object(grants, f"destination_auth[{topic}]").items()}
    for sub, roles in _object(body.get("subscription_auth_roles"), "subscription_auth_roles").items():
        if not isinstance(roles, list):
            raise PermissionInputError("subscription_auth_roles values are lists of roles")
        out["subscription_auth_roles"][sub] = sorted({validate_role(r) for r in roles})
    return out


def _object(value: Any, what: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PermissionInputError(f"{what} must be a JSON object")
    return value


def normalized(auth: dict | None) -> dict:
    """A stored auth_policies object with every field present (missing = nothing granted)."""
    out = copy.deepcopy(EMPTY_AUTH_POLICIES)
    for key in out:
        if isinstance((auth or {}).get(key), dict):
            out[key] = copy.deepcopy(auth[key])
    return out


# -- editing ----------------------------------------------------------------------
def grant_namespace(auth: dict | None, role: str, actions: Iterable[str]) -> dict:
    out = normalized(auth)
    out["namespace_auth"][validate_role(role)] = validate_actions(list(actions))
    return out


def revoke_namespace(auth: dict | None, role: str) -> dict:
    out = normalized(auth)
    out["namespace_auth"].pop(role, None)
    return out


def grant_topic(auth: dict | None, topic: str, role: str, actions: Iterable[str]) -> dict:
    out = normalized(auth)
    out["destination_auth"].setdefault(topic, {})[validate_role(role)] = validate_actions(list(actions))
    return out


def revoke_topic(auth: dict | None, topic: str, role: str) -> dict:
    out = normalized(auth)
    grants = out["destination_auth"].get(topic, {})
    grants.pop(role, None)
    if not grants:
        out["destination_auth"].pop(topic, None)
    return out


def grant_subscription(auth: dict | None, subscription: str, roles: Iterable[str]) -> dict:
    out = normalized(auth)
    if not isinstance(subscription, str) or not subscription:
        raise PermissionInputError("a subscription name is required")
    current = set(out["subscription_auth_roles"].get(subscription, []))
    out["subscription_auth_roles"][subscription] = sorted(current | {validate_role(r) for r in roles})
    return out


def revoke_subscription(auth: dict | None, subscription: str, role: str) -> dict:
    out = normalized(auth)
    roles = [r for r in out["subscription_auth_roles"].get(subscription, []) if r != role]
    if roles:
        out["subscription_auth_roles"][subscription] = roles
    else:
        out["subscription_auth_roles"].pop(subscription, None)
    return out


def topic_permissions(auth: dict | None, topic: str) -> dict[str, list[str]]:
    """Every role's actions on ``topic``: the namespace's grants merged with the topic's."""
    auth = normalized(auth)
    merged: dict[str, set[str]] = {r: set(a) for r, a in auth["namespace_auth"].items()}
    for name in _topic_keys(topic):
        for role, actions in auth["destination_auth"].get(name, {}).items():
            merged.setdefault(role, set()).update(actions)
    return {r: sorted(a) for r, a in sorted(merged.items())}


def _topic_keys(topic: str) -> list[str]:
    m = _PARTITION.match(topic)
    return [topic, m.group(1)] if m else [topic]


# -- deciding ---------------------------------------------------------------------
@dataclass(frozen=True)
class Authorizer:
    """Decisions for one broker's settings; the policies come from the caller."""
    enabled: bool
    super_users: frozenset

    @classmethod
    def from_settings(cls, settings) -> "Authorizer":
        return cls(bool(settings.authorization_enabled), frozenset(settings.super_user_roles))

    def is_super_user(self, role: str | None) -> bool:
        return not self.enabled or (role is not None and role in self.super_users)

    def is_tenant_admin(self, role: str | None, tenant_info: dict | None) -> bool:
        """Super-user, or one of the tenant's ``adminRoles``."""
        if self.is_super_user(role):
            return True
        return role is not None and role in ((tenant_info or {}).get("adminRoles") or [])

    def may(self, role: str | None, action: str, topic: str, auth: dict | None, tenant_info: dict | None,
            subscription: str | None = None) -> bool:
        """Whether ``role`` may ``action`` ("produce", "consume", "lookup") on ``topic`` (full name)."""
        if self.is_tenant_admin(role, tenant_info):
            return True
        if role is None:
            return False
        granted = set(topic_permissions(auth, topic).get(role, []))
        if action == "lookup":
            return bool(granted & {"produce", "consume"})
        if action == "consume" and subscription is not None:
            allowed = normalized(auth)["subscription_auth_roles"].get(subscription)
            if allowed and role not in allowed:
                return False
        return action in granted
