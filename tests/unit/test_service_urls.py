"""Checking a service URL given on the command line (magnetar/service_urls.py):
several hosts are one URL, as Pulsar's clients accept; one live broker among
them will do; none is one clear error."""
from __future__ import annotations

import socket

import pytest

from magnetar.service_urls import require_broker, require_pulsar_url


def test_a_url_naming_several_hosts_gives_each_with_its_port():
    assert require_pulsar_url("pulsar://a:6650,b:7000,c") == [("a", 6650), ("b", 7000), ("c", 6650)]
    assert require_pulsar_url("pulsar+ssl://a,b:1") == [("a", 6651), ("b", 1)]


@pytest.mark.parametrize("url, says", [
    ("http://a:8080,b:8080", r"admin \(HTTP\) URL"),
    ("a:6650", "not a Pulsar URL"),
    ("pulsar://a:1,,b:2", "empty host"),
    ("pulsar://a:1,b:port", "host number 2"),
])
def test_a_wrong_url_is_one_clear_error(url, says):
    with pytest.raises(ValueError, match=says):
        require_pulsar_url(url)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_live_broker_among_the_hosts_will_do():
    with socket.create_server(("127.0.0.1", 0)) as live:
        port = live.getsockname()[1]
        require_broker(f"pulsar://127.0.0.1:{_dead_port()},127.0.0.1:{port}")


def test_no_live_host_says_so():
    url = f"pulsar://127.0.0.1:{_dead_port()},127.0.0.1:{_dead_port()}"
    with pytest.raises(ValueError, match="no broker at pulsar://127.0.0.1:"):
        require_broker(url)
