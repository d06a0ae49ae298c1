"""The chaos harness's network (magnetar_chaos/netns.py) on the real kernel:
brokers' namespaces reach etcd and each other, clients reach the brokers,
each partition mode (isolate, zombie, etcd, clients, majority, one-way) and the object store cut cut
exactly what it says, a heal restores it, and
nothing of ours is left afterwards. Needs root (skipped otherwise)."""
from __future__ import annotations

import select
import socket
import subprocess
import sys
import time

import pytest

from magnetar_chaos.netns import Network, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))

SEED = 987654  # a tag no chaos run of the docs or the Makefile uses


def _listen(address: str) -> socket.socket:
    sock = socket.socket()
    sock.bind((address, 0))
    sock.listen(128)  # never accepted: room for every probe of the test
    return sock


def _reaches_from(net: Network, k: int, address: str, port: int) -> bool:
    """Whether a TCP connect from inside broker k's namespace succeeds within 1 s."""
    code = ("import socket,sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)\n"
            "except OSError:\n sys.exit(1)")
    return subprocess.run(["ip", "netns", "exec", net.namespace(k), sys.executable, "-c", code, address,
                           str(port)], capture_output=True).returncode == 0


def _reaches_from_host(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=1).close()
        return True
    except OSError:
        return False


def _ours() -> str:
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return "\n".join(line for line in (links + spaces).splitlines() if f"mgc{SEED}" in line or f"mgc-{SEED}-" in line)


@pytest.fixture
def net():
    network = Network(SEED, 3)
    try:
        yield network
    finally:
        network.teardown()
        assert _ours() == "", "the network was not removed"


_SERVER = ("import socket,sys\ns=socket.socket();s.bind((sys.argv[1],7777));s.listen(128)\n"
           "u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);u.bind((sys.argv[1],7778));u.settimeout(0.05)\n"
           "print('up',flush=True)\ns.settimeout(0.05)\n"
           "while True:\n"
           " try: s.accept()\n except OSError: pass\n"
           " try: print(u.recv(64).decode(),flush=True)\n except OSError: pass\n")


def _server(net: Network, k: int, address: str) -> subprocess.Popen:
    """A TCP listener (port 7777) in broker k's namespace that also prints
    each UDP datagram it gets on port 7778 (what shows a one-way cut)."""
    proc = subprocess.Popen(["ip", "netns", "exec", net.namespace(k), sys.executable, "-c", _SERVER, address],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def _datagram_arrives(server: subprocess.Popen, source: str, address: str, token: str) -> bool:
    """Whether a UDP datagram from ``source`` (an address of the host
    namespace) reaches the server at ``address`` within 2 s."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind((source, 0))
        u.sendto(token.encode(), (address, 7778))
    ready, _, _ = select.select([server.stdout], [], [], 2.0)
    return bool(ready) and server.stdout.readline().strip() == token


def test_each_partition_mode_cuts_what_it_says_and_heals(net):
    plan = net.setup()
    etcd, clients = _listen(plan.etcd), _listen(plan.gateway)
    # Broker-side servers in namespaces 1 and 2, for the host's clients and the other brokers.
    servers = [_server(net, 1, plan.broker(1)), _server(net, 2, plan.broker(2))]
    try:
        etcd_port, client_port = etcd.getsockname()[1], clients.getsockname()[1]

        def reach() -> dict[str, bool]:
            return {"etcd": _reaches_from(net, 2, plan.etcd, etcd_port),
                    "peer": _reaches_from(net, 1, plan.broker(2), 7777),
                    "clients": _reaches_from_host(plan.broker(2), 7777),
                    "host": _reaches_from(net, 2, plan.gateway, client_port),
                    "other etcd": _reaches_from(net, 0, plan.etcd, etcd_port),
                    "others": _reaches_from(net, 0, plan.broker(1), 7777)}

        everything = dict.fromkeys(("etcd", "peer", "clients", "host", "other etcd", "others"), True)
        assert reach() == everything
        for mode, expected in (("etcd", {**everything, "etcd": False}),
                               ("zombie", {**everything, "etcd": False, "peer": False}),
                               ("isolate", {**everything, "etcd": False, "peer": False, "clients": False,
                                            "host": False}),
                               ("clients", {**everything, "clients": False, "host": False}),
                               # Brokers 0 and 1 lose etcd and broker 2; they keep each other.
                               ("majority", {**everything, "peer": False, "other etcd": False}),
                               # Broker 2's packets to etcd and its peers vanish: TCP fails both
                               # ways (a peer's SYN arrives, the SYN-ACK is lost)...
                               ("one-way", {**everything, "etcd": False, "peer": False})):
            net.partition(mode, 2)
            assert reach() == expected, mode
            if mode == "one-way":  # ... yet what etcd sends broker 2 arrives
                assert _datagram_arrives(servers[1], plan.etcd, plan.broker(2), "from-etcd")
            net.heal()
            assert reach() == everything, f"after healing {mode}"
        assert _datagram_arrives(servers[1], plan.etcd, plan.broker(2), "healed")
    finally:
        for server in servers:
            server.kill()
            server.wait()
        etcd.close()
        clients.close()


def test_leftovers_of_a_dead_run_are_removed_but_a_live_run_is_left_alone(net):
    net.setup()
    crashed = Network(SEED, 3)  # a new run with the same seed: the old one died without tearing down
    sleeper = subprocess.Popen(["ip", "netns", "exec", net.namespace(0), "sleep", "60"])
    deadline = time.monotonic() + 10
    while not subprocess.run(["ip", "netns", "pids", net.namespace(0)], capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline, "the sleeper never entered the namespace"
        time.sleep(0.05)
    try:
        with pytest.raises(RuntimeError, match="run in namespace"):
            crashed.remove_leftovers()
    finally:
        sleeper.kill()
        sleeper.wait()
    crashed.remove_leftovers()
    assert _ours() == ""


def test_the_objectstore_cut_cuts_the_object_store_only(net):
    plan = net.setup()
    etcd, store, clients = _listen(plan.etcd), _listen(plan.objectstore), _listen(plan.gateway)
    servers = [_server(net, 2, plan.broker(2))]
    try:
        etcd_port, store_port = etcd.getsockname()[1], store.getsockname()[1]

        def reach() -> dict[str, bool]:
            return {"store": _reaches_from(net, 2, plan.objectstore, store_port),
                    "etcd": _reaches_from(net, 2, plan.etcd, etcd_port),
                    "peer": _reaches_from(net, 0, plan.broker(2), 7777),
                    "clients": _reaches_from_host(plan.broker(2), 7777),
                    "other store": _reaches_from(net, 0, plan.objectstore, store_port)}

        everything = dict.fromkeys(("store", "etcd", "peer", "clients", "other store"), True)
        assert reach() == everything
        net.partition("objectstore", 2)
        assert reach() == {**everything, "store": False}
        net.heal()
        assert reach() == everything
    finally:
        for server in servers:
            server.kill()
            server.wait()
        etcd.close()
        store.close()
        clients.close()
