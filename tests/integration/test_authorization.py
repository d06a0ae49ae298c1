"""Authorization with Pulsar's model on the binary protocol: namespace
permissions per role (granted through the admin API), super-users; refused
operations create nothing."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pulsar
import pytest

from magnetar.security.tokens import create_token

from magnetar_harness.secured import token_secured_broker


@pytest.fixture
def broker_and_secret(tmp_path):
    broker, secret = token_secured_broker(tmp_path)
    # The admin API asks for credentials too: these tests call it as a super-user.
    broker.admin_token = create_token("admin", secret_key=secret)
    yield broker, secret
    broker.stop()


def _client(broker, secret, role):
    return pulsar.Client(broker.service_url, operation_timeout_seconds=10,
                         authentication=pulsar.AuthenticationToken(create_token(role, secret_key=secret)))


def _admin(broker, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {broker.admin_token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
        return json.loads(raw) if raw else None


def test_roles_do_only_what_they_were_granted(broker_and_secret):
    broker, secret = broker_and_secret
    _admin(broker, "POST", "/admin/v2/namespaces/public/default/permissions/alice", ["consume"])
    assert _admin(broker, "GET", "/admin/v2/namespaces/public/default/permissions") == {"alice": ["consume"]}
    admin = _client(broker, secret, "admin")
    alice = _client(broker, secret, "alice")
    bob = _client(broker, secret, "bob")
    try:
        admin.create_producer("persistent://public/default/orders").send(b"from a super-user")
        consumer = alice.subscribe("persistent://public/default/orders", "alice-sub",
                                   initial_position=pulsar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10_000).data() == b"from a super-user"
        with pytest.raises(pulsar.AuthorizationError):
            alice.create_producer("persistent://public/default/orders")  # consume only
        with pytest.raises(pulsar.AuthorizationError):
            bob.subscribe("persistent://public/default/orders", "bob-sub")  # nothing granted
        with pytest.raises(pulsar.AuthorizationError):
            bob.create_producer("persistent://public/default/bobs-own")
        # Refused operations created nothing.
        subs = _admin(broker, "GET", "/admin/v2/persistent/public/default/orders/subscriptions")
        assert "bob-sub" not in subs
        with pytest.raises(urllib.error.HTTPError) as missing:
            _admin(broker, "GET", "/admin/v2/persistent/public/default/bobs-own/stats")
        assert missing.value.code == 404
        # A revoked grant takes effect for new subscriptions.
        _admin(broker, "DELETE", "/admin/v2/namespaces/public/default/permissions/alice")
        with pytest.raises(pulsar.AuthorizationError):
            alice.subscribe("persistent://public/default/orders", "another-sub")
    finally:
        for c in (admin, alice, bob):
            c.close()


def test_unknown_actions_are_refused(broker_and_secret):
    broker, _ = broker_and_secret
    with pytest.raises(urllib.error.HTTPError) as bad:
        _admin(broker, "POST", "/admin/v2/namespaces/public/default/permissions/alice", ["fly"])
    assert bad.value.code == 400


def test_topic_and_subscription_grants_through_the_admin_api(broker_and_secret):
    broker, secret = broker_and_secret
    base = "/admin/v2/persistent/public/default"
    _admin(broker, "POST", f"{base}/only-this/permissions/alice", ["produce"])
    assert _admin(broker, "GET", f"{base}/only-this/permissions") == {"alice": ["produce"]}
    _admin(broker, "POST", "/admin/v2/namespaces/public/default/permissions/bob", ["consume"])
    _admin(broker, "POST", "/admin/v2/namespaces/public/default/permissions/carol", ["consume"])
    _admin(broker, "POST", "/admin/v2/namespaces/public/default/permissions/subscription/billing", ["bob"])
    assert _admin(broker, "GET", "/admin/v2/namespaces/public/default/permissions/subscription") == \
        {"billing": ["bob"]}
    alice, bob, carol = (_client(broker, secret, r) for r in ("alice", "bob", "carol"))
    try:
        alice.create_producer("persistent://public/default/only-this").send(b"granted here")
        with pytest.raises(pulsar.AuthorizationError):
            alice.create_producer("persistent://public/default/another")
        bob.subscribe("persistent://public/default/only-this", "billing").close()
        with pytest.raises(pulsar.AuthorizationError):  # consume on the namespace, but not on that subscription
            carol.subscribe("persistent://public/default/only-this", "billing")
        carol.subscribe("persistent://public/default/only-this", "carols").close()
        # Revoked: alice may no longer produce there.
        _admin(broker, "DELETE", f"{base}/only-this/permissions/alice")
        _admin(broker, "DELETE", "/admin/v2/namespaces/public/default/permissions/subscription/billing/bob")
        assert _admin(broker, "GET", "/admin/v2/namespaces/public/default/permissions/subscription") == {}
        with pytest.raises(pulsar.AuthorizationError):
            alice.create_producer("persistent://public/default/only-this")
    finally:
        for c in (alice, bob, carol):
            c.close()


def test_grants_in_the_namespace_policies_body_count_at_once(broker_and_secret):
    broker, secret = broker_and_secret
    _admin(broker, "PUT", "/admin/v2/tenants/acme", {"allowedClusters": ["standalone"]})
    _admin(broker, "PUT", "/admin/v2/namespaces/acme/bodies", {
        "auth_policies": {"namespace_auth": {"alice": ["produce"]},
                          "destination_auth": {"persistent://acme/bodies/audit": {"bob": ["consume"]}}},
        "retention_policies": {"retentionTimeInMinutes": 10, "retentionSizeInMB": 1}})
    assert _admin(broker, "GET", "/admin/v2/namespaces/acme/bodies/permissions") == {"alice": ["produce"]}
    alice, bob = _client(broker, secret, "alice"), _client(broker, secret, "bob")
    try:
        alice.create_producer("persistent://acme/bodies/audit").send(b"x")
        bob.subscribe("persistent://acme/bodies/audit", "b").close()
        with pytest.raises(pulsar.AuthorizationError):
            bob.subscribe("persistent://acme/bodies/other", "b")
    finally:
        alice.close()
        bob.close()
    with pytest.raises(urllib.error.HTTPError) as bad:
        _admin(broker, "PUT", "/admin/v2/namespaces/acme/worse", {"auth_policies": {"namespace_auth": {"x": ["fly"]}}})
    assert bad.value.code == 400


def _status(broker, method, path, body=None, token=None) -> int:
    """The admin API's HTTP status for a call, with ``token`` or no credential at all."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_clients_without_a_credential_get_the_anonymous_role(tmp_path):
    """anonymous_user_role = "guest": no credential is the role "guest", with
    exactly what was granted to it, on the binary protocol and the admin API;
    a wrong credential is still refused (never downgraded to the guest)."""
    broker, secret = token_secured_broker(tmp_path, extra='anonymous_user_role = "guest"\n')
    broker.admin_token = create_token("admin", secret_key=secret)
    try:
        _admin(broker, "PUT", "/admin/v2/namespaces/public/guests", {})
        _admin(broker, "POST", "/admin/v2/namespaces/public/guests/permissions/guest", ["produce"])
        _admin(broker, "PUT", "/admin/v2/tenants/guestco", {"adminRoles": ["guest"], "allowedClusters": ["standalone"]})
        anonymous = pulsar.Client(broker.service_url, operation_timeout_seconds=10)
        forged = pulsar.Client(broker.service_url, operation_timeout_seconds=3,
                               authentication=pulsar.AuthenticationToken("not-a-jwt"))
        try:
            anonymous.create_producer("persistent://public/guests/visitors").send(b"hello from nobody")
            with pytest.raises(pulsar.AuthorizationError):  # produce granted, consume not
                anonymous.subscribe("persistent://public/guests/visitors", "peek")
            with pytest.raises(pulsar.AuthorizationError):  # nothing granted in public/default
                anonymous.create_producer("persistent://public/default/visitors")
            with pytest.raises(pulsar.PulsarException):
                forged.create_producer("persistent://public/guests/visitors")
        finally:
            anonymous.close()
            forged.close()
        # The admin API: no credential is the guest, not 401.
        assert _status(broker, "GET", "/admin/v2/clusters") == 200                      # any role
        assert _status(broker, "GET", "/admin/v2/tenants") == 403                       # super-users only
        assert _status(broker, "GET", "/admin/v2/persistent/public/guests/visitors/stats") == 200  # may produce there
        assert _status(broker, "GET", "/admin/v2/persistent/public/default/other/stats") == 403
        assert _status(broker, "PUT", "/admin/v2/namespaces/guestco/mine", {}) in (200, 204)  # guest is its admin
        assert _status(broker, "PUT", "/admin/v2/namespaces/public/not-mine", {}) == 403
        assert _status(broker, "GET", "/admin/v2/tenants", token="not-a-jwt") == 401     # a bad credential stays bad
        assert "guestco/mine" in _admin(broker, "GET", "/admin/v2/namespaces/guestco")
    finally:
        broker.stop()
