"""The local etcd member picks its two ports among the free ones, never
one it was told to leave alone: ``magnetar cluster up --port P`` starts etcd
first, then brokers on P, P+1, ...; a port free when etcd looked is not
reserved, and etcd once took the port broker 0 was about to bind (CI:
"Pulsar protocol port ... is already in use")."""
from __future__ import annotations

from magnetar.metadata import etcd_server
from magnetar.metadata.etcd_server import EtcdServer


def test_the_ports_it_picks_are_neither_avoided_nor_the_same(tmp_path, monkeypatch):
    # What the kernel hands out, in turn: an avoided port first, then the
    # client port a second time (a port free again after its probe closed).
    offered = iter([6650, 40001, 8080, 40001, 40002])
    monkeypatch.setattr(etcd_server, "free_port", lambda host="127.0.0.1": next(offered))
    server = EtcdServer(tmp_path, avoid_ports={6650, 6651, 8080, 8081})
    server.client_port = server._free_port()
    server.peer_port = server._free_port()
    assert (server.client_port, server.peer_port) == (40001, 40002)
