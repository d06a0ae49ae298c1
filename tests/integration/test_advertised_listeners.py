"""Advertised listeners (Pulsar's advertisedListeners): a client that names a
listener is sent to that address; an unknown name is an error, as in Pulsar."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pulsar
import pytest

from magnetar.protocol import Connection, Role, ServerError, pb
from magnetar.protocol.commands import Type, command

from magnetar_harness.broker import configured_broker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def broker(tmp_path):
    port = _free_port()
    proc = configured_broker(tmp_path, f"""
advertised_listeners = "internal:pulsar://127.0.0.1:{port},external:pulsar://localhost:{port}"
""")
    proc.port = port
    proc.start()
    yield proc
    proc.stop()


def _lookup(broker, listener: str) -> pb.CommandLookupTopicResponse:
    conn = Connection(Role.CLIENT)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(conn.send(command(Type.CONNECT, client_version="test", protocol_version=20)))
        frames = []
        while not frames:
            frames = conn.receive_data(sock.recv(65536))
        sock.sendall(conn.send(command(Type.LOOKUP, topic="persistent://public/default/l", request_id=1,
                                       advertised_listener_name=listener)))
        frames = []
        while not frames:
            frames = conn.receive_data(sock.recv(65536))
        return frames[0].command.lookupTopicResponse


def test_a_lookup_names_the_listener_the_client_asked_for(broker):
    assert _lookup(broker, "external").brokerServiceUrl == f"pulsar://localhost:{broker.port}"
    assert _lookup(broker, "internal").brokerServiceUrl == f"pulsar://127.0.0.1:{broker.port}"
    unknown = _lookup(broker, "dmz")
    assert unknown.response == pb.CommandLookupTopicResponse.Failed
    assert unknown.error == ServerError.ServiceNotReady and "dmz" in unknown.message
    http = json.loads(urllib.request.urlopen(
        f"{broker.admin_url}/lookup/v2/topic/persistent/public/default/l?listenerName=external", timeout=10).read())
    assert http["brokerUrl"] == f"pulsar://localhost:{broker.port}"
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{broker.admin_url}/lookup/v2/topic/persistent/public/default/l?listenerName=dmz",
                               timeout=10)
    assert missing.value.code == 503


def test_the_official_client_with_a_listener_name(broker):
    client = pulsar.Client(f"pulsar://127.0.0.1:{broker.port}", listener_name="external")
    try:
        consumer = client.subscribe("persistent://public/default/l", "s")
        client.create_producer("persistent://public/default/l").send(b"via external")
        assert consumer.receive(10_000).data() == b"via external"
    finally:
        client.close()
    lost = pulsar.Client(f"pulsar://127.0.0.1:{broker.port}", listener_name="dmz", operation_timeout_seconds=3)
    try:
        with pytest.raises(Exception):  # ServiceNotReady, retried until the operation timeout
            lost.create_producer("persistent://public/default/l")
    finally:
        lost.close()


def test_a_malformed_listener_list_stops_the_broker_with_a_clear_line(tmp_path):
    config = tmp_path / "broker.toml"
    config.write_text('advertised_listeners = "internal:http://127.0.0.1:1"\n')
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "standalone", "--config", str(config),
                           "--data-dir", str(tmp_path / "data"), "--port", "0", "--admin-port", "-1"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "advertised_listeners item 'internal:http://127.0.0.1:1'" in done.stderr
    assert "Traceback" not in done.stderr
