"""A TCP proxy on loopback between the clients of a chaos run and the broker,
so the nemesis can cut connections (the ``cut`` fault).

Bytes pass unchanged. :meth:`CutProxy.cut` closes every connection through
it at once, in the middle of whatever frame is on its way: a client sees its
connection reset and reconnects (through the proxy again, since a standalone
broker answers lookups with the URL the client dialled), the broker sees a
connection end with sends, acks or a half frame in flight.
"""
from __future__ import annotations

import socket
import threading


class CutProxy:
    """Listens on ``host``:``listen_port`` (0: any free port) and forwards to
    ``target_host`` (default ``host``):``target_port``. A fixed port on
    another loopback address than the target's lets the proxy stand at a
    broker's advertised address (the regions topology: every connection to
    region B, the replicators' included, passes through it). OSError if
    the port is taken."""

    def __init__(self, target_port: int, host: str = "127.0.0.1", listen_port: int = 0,
                 target_host: str | None = None) -> None:
        self.target = (target_host or host, target_port)
        self.host = host
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, listen_port))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.cuts = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        threading.Thread(target=self._accept, name="cut-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    def cut(self) -> int:
        """Close every connection through the proxy now; returns how many."""
        with self._lock:
            self.cuts += 1
        return self._drop_all()

    def close(self) -> None:
        self._closed = True
        _close(self.listener)
        self._drop_all()

    def _drop_all(self) -> int:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                _close(sock)
        return len(pairs)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)  # the broker is down: the client retries
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, self.relay()), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, self.relay(from_broker=True)),
                             daemon=True).start()

    def relay(self, from_broker: bool = False):
        """``relay(data, dst)`` for one direction of one connection: sends
        ``data`` on (raising OSError cuts the connection). Subclasses that
        look at frames keep their per-connection state in the closure."""
        return lambda data, dst: dst.sendall(data)

    def _pump(self, src: socket.socket, dst: socket.socket, relay) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                relay(data, dst)
        except OSError:
            pass
        finally:
            _close(src)
            _close(dst)
            with self._lock:
                self._pairs = [p for p in self._pairs if src not in p]


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
