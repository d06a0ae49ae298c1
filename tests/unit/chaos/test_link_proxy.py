"""The link proxy (magnetar_chaos/link_proxy.py) on real sockets: bytes pass
unchanged and in order, the delay is applied each way, loss stalls, resets
reset, a stalled link holds and releases, settings change while it runs."""
from __future__ import annotations

import os
import socket
import socketserver
import statistics
import threading
import time

import pytest

from magnetar_chaos.link_proxy import DegradingProxy, LinkSettings
from magnetar_harness.waiting import wait_for


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass


@pytest.fixture
def echo():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy():
    made = DegradingProxy(seed=7).start()
    yield made
    made.stop()


def _connect(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        if not chunk:
            raise ConnectionError(f"closed after {got} of {n} bytes")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    began = time.perf_counter()
    sock.sendall(payload)
    assert _recv_exactly(sock, len(payload)) == payload
    return time.perf_counter() - began


def test_bytes_pass_unchanged_and_in_order_with_jitter(proxy, echo):
    proxy.set(delay_s=0.001, jitter_s=0.001)
    address = proxy.listen(echo)
    data = os.urandom(3 * 1024 * 1024)
    with _connect(address) as sock:
        received = []

        def read() -> None:
            received.append(_recv_exactly(sock, len(data)))
        reader = threading.Thread(target=read)
        reader.start()
        view, i, sizes = memoryview(data), 0, [1, 7, 100, 1500, 65536, 200_000]
        while i < len(data):  # chunks of every size, so jitter has many to reorder if it could
            n = sizes[i % len(sizes)]
            sock.sendall(view[i:i + n])
            i += n
        reader.join(60)
    assert received and received[0] == data
    stats = proxy.stats()
    assert stats.bytes_forward == stats.bytes_back == len(data)


def test_the_delay_is_applied_each_way_and_changes_while_running(proxy, echo):
    address = proxy.listen(echo)
    with _connect(address) as sock:
        quick = statistics.median(_round_trip(sock) for _ in range(20))
        proxy.set(delay_s=0.02)
        slow = [_round_trip(sock) for _ in range(10)]
        proxy.set(delay_s=0.0005)
        sub_ms = [_round_trip(sock) for _ in range(50)]
    assert min(slow) >= 0.04, f"round trips {slow}: the delay is 20 ms each way"
    assert min(sub_ms) >= 0.001, f"round trips {sub_ms}: the delay is 0.5 ms each way"
    assert quick < 0.04, f"without a delay the median round trip was {quick * 1e3:.1f} ms"


def test_loss_stalls_the_stream_for_the_pause_and_loses_nothing(proxy, echo):
    proxy.set(loss=1.0, loss_pause_s=0.15)
    address = proxy.listen(echo)
    with _connect(address) as sock:
        rtt = _round_trip(sock, b"x" * 1000)
    assert rtt >= 0.3, f"a chunk lost each way stalls each way 150 ms, the round trip took {rtt * 1e3:.0f} ms"
    assert proxy.stats().losses >= 2


def test_a_reset_reaches_both_sides(proxy):
    server = socket.create_server(("127.0.0.1", 0))
    address = proxy.listen(server.getsockname()[:2])
    proxy.set(reset=1.0)
    with _connect(address) as sock:
        accepted, _ = server.accept()
        sock.sendall(b"doomed")
        with pytest.raises(ConnectionResetError):
            accepted.settimeout(10)
            while accepted.recv(100):  # the proxy's RST, not a FIN (a FIN would end this loop)
                pass
        with pytest.raises(ConnectionResetError):
            sock.settimeout(10)
            while sock.recv(100):
                pass
        accepted.close()
    server.close()
    assert proxy.stats().resets == 1


def test_cut_resets_every_connection_and_new_ones_go_through(proxy, echo):
    address = proxy.listen(echo)
    socks = [_connect(address) for _ in range(3)]
    for sock in socks:
        _round_trip(sock)
    assert proxy.cut() == 3
    for sock in socks:
        with pytest.raises(ConnectionResetError):
            while sock.recv(100):
                pass
        sock.close()
    with _connect(address) as sock:
        _round_trip(sock)


def test_a_stalled_link_holds_bytes_then_releases_them_in_order(proxy, echo):
    address = proxy.listen(echo)
    with _connect(address) as sock:
        _round_trip(sock)
        proxy.set(stall=True)
        sock.sendall(b"held-1")
        sock.sendall(b"held-2")
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            sock.recv(100)
        proxy.set(stall=False)
        sock.settimeout(10)
        assert _recv_exactly(sock, 12) == b"held-1held-2"


def test_a_target_that_refuses_resets_the_accepted_connection(proxy):
    closed = socket.create_server(("127.0.0.1", 0))
    target = closed.getsockname()[:2]
    closed.close()
    address = proxy.listen(target)
    with pytest.raises(ConnectionResetError):  # the reset may come before connect() returns
        with _connect(address) as sock:
            sock.sendall(b"x")
            sock.recv(10)
    wait_for(lambda: proxy.stats().refused == 1, 10, 0.01, "the refusal counted")


def test_settings_out_of_range_are_refused_with_a_clear_error(proxy):
    with pytest.raises(ValueError, match="loss is a probability"):
        proxy.set(loss=2)
    with pytest.raises(ValueError, match="delay_s"):
        LinkSettings(delay_s=-1)
    assert proxy.settings == LinkSettings()


def test_a_proxy_not_started_says_so():
    with pytest.raises(RuntimeError, match="start"):
        DegradingProxy().listen(("127.0.0.1", 1))
