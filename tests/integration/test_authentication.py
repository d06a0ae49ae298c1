"""Token authentication on CONNECT with the official client: allowed, refused,
and refreshed through AUTH_CHALLENGE when the token expires mid-connection."""
from __future__ import annotations

import os
import socket
import time
import urllib.error
import urllib.request

import pulsar
import pytest

from magnetar.security.tokens import create_token
from tests.helpers import wait_for

from magnetar_harness.broker import configured_broker
from magnetar_harness.secured import token_secured_broker


@pytest.fixture
def secured(tmp_path):
    broker, secret = token_secured_broker(tmp_path, authorization=False, extra="auth_refresh_check_interval_s = 1.0")
    yield broker, secret
    broker.stop()


def test_a_valid_token_produces_and_consumes(secured):
    broker, secret = secured
    client = pulsar.Client(broker.service_url, authentication=pulsar.AuthenticationToken(
        create_token("alice", secret_key=secret)))
    try:
        consumer = client.subscribe("persistent://public/default/auth", "s")
        client.create_producer("persistent://public/default/auth").send(b"hello")
        assert consumer.receive(timeout_millis=10_000).data() == b"hello"
    finally:
        client.close()


@pytest.mark.parametrize("credential", ["wrong-secret", "garbage", "expired", "none"])
def test_bad_or_missing_credentials_are_refused_and_reach_no_topic(secured, credential):
    broker, secret = secured
    if credential == "wrong-secret":
        auth = pulsar.AuthenticationToken(create_token("mallory", secret_key=os.urandom(32)))
    elif credential == "garbage":
        auth = pulsar.AuthenticationToken("not.a.jwt")
    elif credential == "expired":
        auth = pulsar.AuthenticationToken(create_token("alice", secret_key=secret, expires_in_s=-60))
    else:
        auth = None
    client = pulsar.Client(broker.service_url, authentication=auth, operation_timeout_seconds=3)
    try:
        # The broker answers ERROR(AuthenticationError) and closes; the C++
        # client retries the connection until its operation timeout.
        with pytest.raises((pulsar.AuthenticationError, pulsar.Timeout, pulsar.ConnectError)):
            client.create_producer("persistent://public/default/forbidden")
    finally:
        client.close()
    assert broker.alive
    with pytest.raises(urllib.error.HTTPError) as missing:  # it never reached a topic
        urllib.request.urlopen(urllib.request.Request(
            f"{broker.admin_url}/admin/v2/persistent/public/default/forbidden/stats",
            headers={"Authorization": f"Bearer {create_token('alice', secret_key=secret)}"}), timeout=10)
    assert missing.value.code == 404
    # A good client still works beside the refused ones.
    ok = pulsar.Client(broker.service_url, authentication=pulsar.AuthenticationToken(
        create_token("alice", secret_key=secret)))
    ok.create_producer("persistent://public/default/fine").send(b"ok")
    ok.close()


def test_the_refusal_on_the_wire_is_authentication_error_then_close(secured):
    from magnetar.protocol import Connection, Role, pb
    from magnetar.protocol.commands import Type, command

    broker, _ = secured
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    conn = Connection(Role.CLIENT)
    sock.sendall(conn.send(command(Type.CONNECT, client_version="raw", protocol_version=20,
                                   auth_method_name="token", auth_data=b"garbage")))
    frames, data = [], b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break  # closed by the broker
        frames.extend(conn.receive_data(chunk))
    assert [f.command.type for f in frames] == [Type.ERROR]
    assert frames[0].command.error.error == pb.AuthenticationError
    sock.close()


def test_a_token_that_expires_mid_connection_is_refreshed_through_the_challenge(secured):
    broker, secret = secured
    issued = []

    def supplier():
        token = create_token("alice", secret_key=secret, expires_in_s=3)
        issued.append(time.time())
        return token

    client = pulsar.Client(broker.service_url, authentication=pulsar.AuthenticationToken(supplier))
    try:
        producer = client.create_producer("persistent://public/default/refresh")
        producer.send(b"before")
        wait_for(lambda: len(issued) >= 2, timeout=20, what="the broker's challenge and a fresh token")
        producer.send(b"after")  # same connection, still authenticated
    finally:
        client.close()


def test_magnetars_client_presents_a_token_and_answers_the_challenge(secured):
    """Our client: a good token works (and is re-read from its file when the
    broker challenges it); a wrong one fails with AuthenticationError at once."""
    from magnetar import client as magnetar_client

    broker, secret = secured
    token_file = broker.data_dir.parent / "alice.jwt"
    token_file.write_text(create_token("alice", secret_key=secret, expires_in_s=3))
    client = magnetar_client.Client(broker.service_url, operation_timeout_seconds=10,
                                    authentication=magnetar_client.AuthenticationToken(f"file://{token_file}"))
    try:
        producer = client.create_producer("persistent://public/default/ours-auth")
        producer.send(b"first")
        token_file.write_text(create_token("alice", secret_key=secret, expires_in_s=600))
        # Past the first token's expiry the broker challenges (every second here); the
        # connection stays because the answer is the fresh token.
        wait_for(lambda: _refreshes(broker) >= 1, 20, what="the broker refreshing our credential")
        producer.send(b"after the refresh")
    finally:
        client.close()
    bad = magnetar_client.Client(broker.service_url, operation_timeout_seconds=5,
                                 authentication=magnetar_client.AuthenticationToken("not.a.jwt"))
    try:
        with pytest.raises(magnetar_client.AuthenticationError):
            bad.create_producer("persistent://public/default/ours-auth")
    finally:
        bad.close()


def _refreshes(broker) -> int:
    return broker.log().count("refreshed its credential")


def test_an_rs256_key_pair_and_htpasswd_users_on_one_broker(tmp_path):
    """Tokens signed with a private key (the broker holds the public one) and
    basic users from an htpasswd file, each producing and consuming; a wrong
    password is refused; the admin API takes the same basic credential."""
    import base64

    from magnetar.security.htpasswd import hash_password
    from magnetar.security.keys import new_key_pair

    private, public = new_key_pair("RS256")
    (tmp_path / "public.pem").write_bytes(public)
    (tmp_path / "users.htpasswd").write_text(f"carol:{hash_password('s3cret')}\n")
    broker = configured_broker(tmp_path, f"""
authentication_enabled = true
authentication_providers = ["token", "basic"]
token_public_key = "file://{tmp_path / 'public.pem'}"
basic_auth_file = "{tmp_path / 'users.htpasswd'}"
""").start()
    try:
        for auth in (pulsar.AuthenticationToken(create_token("dave", private_key=private)),
                     pulsar.AuthenticationBasic("carol", "s3cret")):
            client = pulsar.Client(broker.service_url, authentication=auth, operation_timeout_seconds=10)
            try:
                topic = f"persistent://public/default/pair-{type(auth).__name__}"
                consumer = client.subscribe(topic, "s")
                client.create_producer(topic).send(b"hi")
                assert consumer.receive(timeout_millis=10_000).data() == b"hi"
            finally:
                client.close()
        wrong = pulsar.Client(broker.service_url, authentication=pulsar.AuthenticationBasic("carol", "nope"),
                              operation_timeout_seconds=3)
        try:
            with pytest.raises((pulsar.AuthenticationError, pulsar.Timeout, pulsar.ConnectError)):
                wrong.create_producer("persistent://public/default/pair-wrong")
        finally:
            wrong.close()
        basic = "Basic " + base64.b64encode(b"carol:s3cret").decode()
        req = urllib.request.Request(f"{broker.admin_url}/admin/v2/tenants", headers={"Authorization": basic})
        assert urllib.request.urlopen(req, timeout=10).status == 200
        bad = urllib.request.Request(f"{broker.admin_url}/admin/v2/tenants",
                                     headers={"Authorization": "Basic " + base64.b64encode(b"carol:x").decode()})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=10)
        assert refused.value.code == 401
    finally:
        broker.stop()
