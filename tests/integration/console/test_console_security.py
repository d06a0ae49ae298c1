"""The console behind the admin API's authentication and authorization, in a
real Chromium: a login form (token or user and password), a refused login,
what a role without rights and a tenant admin each see and may do, an
expired token, and a broker that goes down: a clear message every time,
never a blank page."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest

from magnetar.security.htpasswd import hash_password
from magnetar.security.tokens import create_token
from magnetar_harness.broker import configured_broker
from magnetar_harness.pki import make_pki


@pytest.fixture
def secured(tmp_path):
    secret = os.urandom(32)
    (tmp_path / "secret.key").write_bytes(secret)
    (tmp_path / "users.htpasswd").write_text(f"carol:{hash_password('s3cret')}\n")
    broker = configured_broker(tmp_path, f"""
authentication_enabled = true
authentication_providers = ["token", "basic"]
token_secret_key = "file://{tmp_path / 'secret.key'}"
basic_auth_file = "{tmp_path / 'users.htpasswd'}"
authorization_enabled = true
super_user_roles = ["admin", "carol"]
""").start()
    yield broker, lambda role, **kw: create_token(role, secret_key=secret, **kw)
    if broker.alive:
        broker.stop()


def admin_call(broker, method: str, path: str, token: str, body=None) -> int:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(broker.admin_url + path, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def login_token(b, token: str) -> None:
    b.wait(lambda d: b.css("#login-form"), what="the login form")
    b.fill("#login-token", token)
    b.click("#login-submit")


def logout(b) -> None:
    b.driver.execute_script("sessionStorage.clear(); location.hash = '#/overview'; location.reload();")


def test_logins_roles_and_refusals_are_shown_in_the_page(secured, browser_on):
    broker, token = secured
    admin = token("admin")
    assert admin_call(broker, "PUT", "/admin/v2/tenants/acme", admin,
                      {"adminRoles": ["acme-admin"], "allowedClusters": ["standalone"]}) == 204
    assert admin_call(broker, "PUT", "/admin/v2/namespaces/acme/app", admin) == 204
    assert admin_call(broker, "PUT", "/admin/v2/persistent/public/default/secret-topic", admin) == 204
    # Producing from the console needs the produce permission: refused for a role
    # without it, done for one granted it on the namespace.
    message = {"value": "hello"}
    assert admin_call(broker, "POST", "/console/api/produce/public/default/secret-topic", token("reader"),
                      message) == 403
    assert admin_call(broker, "POST", "/admin/v2/namespaces/public/default/permissions/writer", admin,
                      ["produce"]) == 204
    assert admin_call(broker, "POST", "/console/api/produce/public/default/secret-topic", token("writer"),
                      message) == 200
    # The consumer-lag view covers only what the role may read.
    assert admin_call(broker, "GET", "/console/api/subscriptions?namespace=public/default", token("reader")) == 403
    # The data itself is not open: the console's API wants a login too.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(broker.admin_url + "/console/api/overview", timeout=10)
    assert refused.value.code == 401
    b = browser_on(broker.admin_url)
    b.open("#/overview")
    b.wait_text("#login-reason", "This broker wants a login")
    b.shot("login", full=False)
    login_token(b, "not-a-token")
    b.wait_text("#login-reason", "Login refused")
    # A role with no rights: the page loads, shows nothing it may not read, and says why not.
    logout(b)
    login_token(b, token("reader"))
    b.wait_text("#who", "role: reader")
    b.wait_text("main", "No namespace you may read.")
    b.go("#/topic/persistent/public/default/secret-topic")
    b.wait(lambda d: "Not permitted" in b.text("#banner") and "reader" in b.text("#banner"), what="the refusal")
    b.shot("not-permitted", full=False)
    b.go("#/tenants")
    b.click("#create-tenant")
    b.confirm(tenant="evil")
    toast = b.toast()
    assert "Refused by the broker" in toast and "reader" in toast, toast
    assert admin_call(broker, "GET", "/admin/v2/tenants/evil", admin) == 404
    # A tenant admin sees its tenant's namespace and not the others.
    logout(b)
    login_token(b, token("acme-admin"))
    b.wait(lambda d: b.css("[data-namespace='acme/app']"), what="the tenant's namespace")
    assert not b.css("[data-namespace='public/default']")
    # User and password (basic): a super-user sees everything.
    logout(b)
    b.wait(lambda d: b.css("#login-form"), what="the login form")
    b.click("#login-tab-basic")
    b.fill("#login-user", "carol")
    b.fill("#login-password", "s3cret")
    b.click("#login-submit")
    b.wait_text("#who", "role: carol")
    b.wait(lambda d: b.css("[data-namespace='public/default']") and b.css("[data-namespace='acme/app']"),
           what="every namespace")
    # An expired token: the page says so and offers the login again.
    logout(b)
    login_token(b, token("admin", expires_in_s=4))
    b.wait_text("#who", "role: admin")
    b.wait(lambda d: "expired" in b.text("#banner").lower() or b.css("#login-form"), timeout=30,
           what="the expiry to be reported")
    assert b.css("#relogin") or b.css("#login-form")
    b.shot("expired-token", full=False)


def test_a_broker_that_goes_down_is_reported_and_the_page_stays(secured, browser_on):
    broker, token = secured
    b = browser_on(broker.admin_url)
    b.open("#/overview")
    login_token(b, token("admin"))
    b.wait_text("table.brokers", f"127.0.0.1:{broker.admin_port}")
    broker.stop()
    b.wait_text("#banner", "Broker unreachable", timeout=30)
    assert "broker unreachable" in b.text("#conn-text")
    assert f"127.0.0.1:{broker.admin_port}" in b.text("table.brokers")  # the last figures stay
    b.shot("broker-down", full=False)


def test_the_console_over_the_admin_https_port_with_a_token(tmp_path, browser_on):
    """https on admin_tls_port (the test's own CA; this Chromium is told to
    accept it), the same login and pages as over http."""
    pki = make_pki(tmp_path / "pki")
    secret = os.urandom(32)
    (tmp_path / "secret.key").write_bytes(secret)
    broker = configured_broker(tmp_path, f"""
tls_port = 0
admin_tls_port = 0
tls_certificate_file = "{pki.server_cert}"
tls_key_file = "{pki.server_key}"
authentication_enabled = true
authentication_providers = ["token"]
token_secret_key = "file://{tmp_path / 'secret.key'}"
authorization_enabled = true
super_user_roles = ["admin"]
""").start()
    try:
        assert broker.admin_tls_port > 0
        b = browser_on(f"https://127.0.0.1:{broker.admin_tls_port}", ("--ignore-certificate-errors",))
        b.open("#/overview")
        login_token(b, create_token("admin", secret_key=secret))
        b.wait_text("#who", "role: admin")
        b.wait(lambda d: b.css("[data-namespace='public/default']"), what="the bundles over https")
        assert b.driver.current_url.startswith("https://")
        assert b.driver.execute_script("return location.protocol") == "https:"
    finally:
        broker.stop()
