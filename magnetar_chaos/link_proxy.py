"""A forwarding TCP proxy that degrades a link: delay each way, jitter, loss
and resets, each changeable while it runs (the kernel here has no netem).

Contract::

    proxy = DegradingProxy(LinkSettings(delay_s=0.0005)).start()
    host, port = proxy.listen(("10.251.7.10", 6650))     # a route: a free loopback port -> the target
    proxy.listen(target, sock=listening_socket)         # or a socket bound elsewhere (another namespace)
    proxy.set(delay_s=0.002, jitter_s=0.001, loss=0.01, reset=0.001)
    proxy.cut()       # every connection through it reset now; returns how many
    proxy.stats()     # connections, bytes each way, losses, resets, CPU seconds of its thread
    proxy.stop()      # listeners closed, connections reset; idempotent

Bytes pass unchanged and in order, each way, as the chunks read from one
side (nothing is parsed). Each accepted connection gets its own connection
to the route's target. The settings (:class:`LinkSettings`) apply to every
chunk read from either side:

- ``delay_s``: the chunk is written that long after it was read (each way:
  a round trip gains twice it);
- ``jitter_s``: plus a uniform draw in [-jitter, +jitter] (never below
  zero). A chunk is never written before the one read before it: TCP does
  not reorder, jitter on a stream shows as bunching;
- ``loss``: the chance that a chunk is lost. TCP hides a lost segment as a
  stall until it is sent again, so that direction of that connection holds
  the chunk and everything after it ``loss_pause_s`` longer (0.2 s, Linux's
  least retransmission timeout);
- ``reset``: the chance that a chunk ends its connection instead: both
  sides get a TCP reset (RST), what was queued is dropped;
- ``stall``: while true nothing is forwarded and nothing is reset (bytes
  held, new connections accepted and held): a link gone silent. False
  again releases what was held, in order.

Delays are kept with a timerfd (nanoseconds), not the event loop's
millisecond tick: 0.5 ms is 0.5 ms, plus the wake-up (tens of
microseconds). The proxy runs its own event loop (uvloop) in a daemon
thread of the caller's process; its methods may be called from any other
thread. It connects to targets from that process's network namespace.

Failure modes: ``listen`` raises OSError when the address is taken;
ValueError for a setting out of range; RuntimeError when not started. A
target that refuses or cannot be reached: the accepted connection is reset
(as a host that is down looks).
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import ctypes
import dataclasses
import heapq
import itertools
import os
import random
import socket
import struct
import threading
import time
from dataclasses import dataclass

#: Unwritten bytes in one direction past which its source stops being read.
HIGH_WATER = 4 * 1024 * 1024
LOW_WATER = 1024 * 1024
#: Chunks due within this much of now are written in the same wake-up.
SLACK_NS = 20_000
READ_SIZE = 256 * 1024


@dataclass(frozen=True)
class LinkSettings:
    """How the link degrades; see the module docstring."""
    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0
    loss_pause_s: float = 0.2
    reset: float = 0.0
    stall: bool = False

    def __post_init__(self) -> None:
        for name in ("delay_s", "jitter_s"):
            if not 0.0 <= getattr(self, name) <= 60.0:
                raise ValueError(f"{name} must be between 0 and 60 s, not {getattr(self, name)!r}")
        for name in ("loss", "reset"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a probability per chunk, between 0 and 1, not {getattr(self, name)!r}")
        if not 0.0 < self.loss_pause_s <= 60.0:
            raise ValueError(f"loss_pause_s must be above 0 and at most 60 s, not {self.loss_pause_s!r}")


@dataclass
class LinkStats:
    """What went through; ``cpu_s``: CPU seconds the proxy's thread used."""
    connections: int = 0
    open_connections: int = 0
    bytes_forward: int = 0
    bytes_back: int = 0
    losses: int = 0
    resets: int = 0
    refused: int = 0
    cpu_s: float = 0.0


class DegradingProxy:
    """See the module docstring. ``seed`` fixes the draws of jitter, loss
    and reset (one stream for the whole proxy)."""

    def __init__(self, settings: LinkSettings | None = None, seed: int | None = None) -> None:
        self.settings = settings or LinkSettings()
        self._rng = random.Random(seed)
        self._stats = LinkStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._timer: _NanoTimer | None = None
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[_ProxiedConnection] = set()

    # -- life -----------------------------------------------------------------------------------
    def start(self) -> "DegradingProxy":
        if self._thread is not None:
            return self
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="link-proxy", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def _run(self, ready: threading.Event) -> None:
        try:
            import uvloop
            loop = uvloop.new_event_loop()
        except ImportError:  # the pure-asyncio twin: slower, same behaviour
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        self._timer = _NanoTimer(loop)
        ready.set()
        try:
            loop.run_forever()
            # Dials under way are cancelled (create_connection closes its socket).
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self._timer.close()
            loop.close()

    def stop(self) -> None:
        """Close the listeners and reset every connection; idempotent."""
        if self._loop is None or self._thread is None:
            return
        try:
            self._call(self._shutdown)
        except RuntimeError:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop, self._thread = None, None

    def _shutdown(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        for conn in list(self._connections):
            conn.reset()

    def __enter__(self) -> "DegradingProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- routes ---------------------------------------------------------------------------------
    def listen(self, target: tuple[str, int], address: tuple[str, int] = ("127.0.0.1", 0),
               sock: socket.socket | None = None) -> tuple[str, int]:
        """Accept on ``address`` (or on ``sock``, bound already: the proxy
        takes it over) and forward each connection to ``target``; returns
        the address it listens on."""
        async def serve():
            factory = lambda: _ProxiedSocket(self, target)  # noqa: E731 - one per accepted connection
            if sock is not None:
                server = await self._loop.create_server(factory, sock=sock, backlog=256)
            else:
                server = await self._loop.create_server(factory, address[0], address[1], backlog=256,
                                                        reuse_address=True)
            self._servers.append(server)
            return server.sockets[0].getsockname()[:2]
        return self._call_async(serve())

    # -- settings and faults --------------------------------------------------------------------
    def set(self, **changes) -> LinkSettings:
        """Change some settings now (names of :class:`LinkSettings`); the
        chunks already queued keep their times. Returns the new settings."""
        new = dataclasses.replace(self.settings, **changes)
        released = self.settings.stall and not new.stall
        self.settings = new
        if released and self._loop is not None:
            self._loop.call_soon_threadsafe(self._release)
        return new

    def _release(self) -> None:
        for conn in list(self._connections):
            conn.release()

    def cut(self) -> int:
        """Reset every connection through the proxy now; how many there were."""
        def reset_all() -> int:
            conns = list(self._connections)
            for conn in conns:
                conn.reset()
            return len(conns)
        return self._call(reset_all)

    def stats(self) -> LinkStats:
        out = dataclasses.replace(self._stats, open_connections=len(self._connections))
        if self._thread is not None and self._thread.ident is not None:
            try:
                out.cpu_s = time.clock_gettime(time.pthread_getcpuclockid(self._thread.ident))
            except OSError:
                pass
        return out

    # -- the loop's side ------------------------------------------------------------------------
    def _call(self, fn):
        """``fn()`` run on the proxy's loop; its result."""
        if self._loop is None:
            raise RuntimeError("the link proxy is not running: start() it first")
        if threading.current_thread() is self._thread:
            return fn()
        done: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                done.set_exception(exc)
        self._loop.call_soon_threadsafe(run)
        return done.result(30)

    def _call_async(self, coro):
        if self._loop is None:
            coro.close()
            raise RuntimeError("the link proxy is not running: start() it first")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)


class _ProxiedSocket(asyncio.Protocol):
    """One socket of a proxied connection: the accepted one (``target`` set:
    it dials the target once accepted) or the one to the target."""

    def __init__(self, proxy: DegradingProxy, target: tuple[str, int] | None, conn: "_ProxiedConnection | None" = None) -> None:
        self.proxy = proxy
        self.target = target
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.pipe_out: _Direction | None = None  # what this side reads goes out through it

    def connection_made(self, transport) -> None:
        self.transport = transport
        _nodelay(transport)
        if self.target is not None:  # accepted: dial the target before reading anything
            transport.pause_reading()
            self.conn = _ProxiedConnection(self.proxy, self)
            asyncio.get_running_loop().create_task(self.conn.dial(self.target))

    def data_received(self, data: bytes) -> None:
        self.pipe_out.feed(data)

    def eof_received(self) -> bool:
        self.pipe_out.end()
        return True  # half-closed: the other way goes on until it ends too

    def connection_lost(self, exc) -> None:
        if self.conn is not None:
            self.conn.lost(self, exc)

    def pause_writing(self) -> None:
        self.conn.pipe_into(self).src_paused_by_dst(True)

    def resume_writing(self) -> None:
        self.conn.pipe_into(self).src_paused_by_dst(False)


class _ProxiedConnection:
    """An accepted connection and its connection to the target, and a
    :class:`_Direction` each way."""

    def __init__(self, proxy: DegradingProxy, client: _ProxiedSocket) -> None:
        self.proxy = proxy
        self.client = client
        # Both pipes exist from the start: the accepted side may be read before the
        # target answers (its bytes wait in the forward pipe).
        self.upstream = _ProxiedSocket(proxy, None, self)
        forward = _Direction(self, client, self.upstream, "bytes_forward")
        back = _Direction(self, self.upstream, client, "bytes_back")
        client.pipe_out, self.upstream.pipe_out = forward, back
        self.pipes = [forward, back]
        self.closed = False
        proxy._connections.add(self)
        proxy._stats.connections += 1

    async def dial(self, target: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        upstream = self.upstream
        while self.proxy.settings.stall and not self.closed:  # a silent link: the SYN goes nowhere
            await asyncio.sleep(0.01)
        if self.closed:
            return
        try:
            await asyncio.wait_for(loop.create_connection(lambda: upstream, target[0], target[1]), 10)
        except (OSError, asyncio.TimeoutError):
            self.proxy._stats.refused += 1
            self.reset()
            return
        if self.closed:
            _abort(upstream.transport)
            return
        self.pipes[0].flush()
        if not self.client.transport.is_closing():
            self.client.transport.resume_reading()

    def pipe_into(self, side: _ProxiedSocket) -> "_Direction":
        return next(p for p in self.pipes if p.dst is side)

    def release(self) -> None:
        for pipe in self.pipes:
            if not pipe.armed:
                pipe.flush()

    def lost(self, side: _ProxiedSocket, exc) -> None:
        """A socket closed: a reset (``exc``) resets the other side; a clean
        close ends the other way once what is queued for it is written."""
        if self.closed:
            return
        if exc is not None:
            self.reset()
            return
        for pipe in self.pipes:
            if pipe.dst is side:  # nothing more can be written to it
                pipe.drop()
                pipe.ended = True
            elif not pipe.ended:
                pipe.end()
        self.ended_both_ways()

    def ended_both_ways(self) -> None:
        """Close both sockets once each way has ended and is written out."""
        if self.closed or not all(p.ended and not p.queue for p in self.pipes):
            return
        for side in (self.client, self.upstream):
            if side is not None and side.transport is not None:
                side.transport.close()
        self._forget()

    def reset(self) -> None:
        """Both sockets closed with a TCP reset; what was queued dropped."""
        if self.closed:
            return
        self.proxy._stats.resets += 1
        for side in (self.client, self.upstream):
            if side is not None and side.transport is not None:
                _abort(side.transport)
        for pipe in self.pipes:
            pipe.drop()
        self._forget()

    def _forget(self) -> None:
        self.closed = True
        self.proxy._connections.discard(self)


class _Direction:
    """One direction of one connection: chunks read from ``src`` queued
    with the time each is due, written to ``dst`` when due."""

    def __init__(self, conn: _ProxiedConnection, src: _ProxiedSocket, dst: _ProxiedSocket, counter: str) -> None:
        self.conn = conn
        self.proxy = conn.proxy
        self.src, self.dst = src, dst
        self.counter = counter
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()
        self.queued_bytes = 0
        self.last_due = 0
        self.armed = False
        self.ended = False
        self._paused_by_queue = False
        self._paused_by_dst = False

    def feed(self, data: bytes) -> None:
        proxy = self.proxy
        s = proxy.settings
        rng = proxy._rng
        if s.reset and rng.random() < s.reset:
            self.conn.reset()
            return
        now = time.monotonic_ns()
        due = now
        if s.delay_s or s.jitter_s:
            due += max(0, int((s.delay_s + (rng.uniform(-s.jitter_s, s.jitter_s) if s.jitter_s else 0.0)) * 1e9))
        if s.loss and rng.random() < s.loss:
            proxy._stats.losses += 1
            due += int(s.loss_pause_s * 1e9)
        if due < self.last_due:
            due = self.last_due
        self.last_due = due
        if not self.queue and due <= now and not s.stall and self.dst.transport is not None:
            self._write(data)
            return
        self.queue.append((due, data))
        self.queued_bytes += len(data)
        if self.queued_bytes > HIGH_WATER and not self._paused_by_queue:
            self._paused_by_queue = True
            self._pause_src()
        if not self.armed and self.dst.transport is not None:
            self._arm()

    def _arm(self) -> None:
        self.armed = True
        self.proxy._timer.at(self.queue[0][0], self.flush)

    def flush(self) -> None:
        self.armed = False
        if self.proxy.settings.stall or self.conn.closed or self.dst.transport is None:
            return
        horizon = time.monotonic_ns() + SLACK_NS
        out = []
        while self.queue and self.queue[0][0] <= horizon:
            out.append(self.queue.popleft()[1])
        if out:
            data = out[0] if len(out) == 1 else b"".join(out)
            self.queued_bytes -= len(data)
            self._write(data)
            if self._paused_by_queue and self.queued_bytes < LOW_WATER:
                self._paused_by_queue = False
                self._resume_src()
        if self.queue:
            self._arm()
        elif self.ended:
            self._finish()

    def _write(self, data: bytes) -> None:
        transport = self.dst.transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        setattr(self.proxy._stats, self.counter, getattr(self.proxy._stats, self.counter) + len(data))

    def end(self) -> None:
        """The source sent its last byte: the destination's write side is
        closed once the queue is written."""
        self.ended = True
        if not self.queue:
            self._finish()

    def _finish(self) -> None:
        transport = self.dst.transport
        if transport is not None and not transport.is_closing() and transport.can_write_eof():
            transport.write_eof()
        self.conn.ended_both_ways()

    def drop(self) -> None:
        self.queue.clear()
        self.queued_bytes = 0

    def src_paused_by_dst(self, paused: bool) -> None:
        self._paused_by_dst = paused
        if paused:
            self._pause_src()
        elif not self._paused_by_queue:
            self._resume_src()

    def _pause_src(self) -> None:
        if self.src.transport is not None and not self.src.transport.is_closing():
            self.src.transport.pause_reading()

    def _resume_src(self) -> None:
        if self._paused_by_dst or self._paused_by_queue:
            return
        if self.src.transport is not None and not self.src.transport.is_closing():
            self.src.transport.resume_reading()


def _nodelay(transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def _abort(transport) -> None:
    """Close with a TCP reset (SO_LINGER 0), not a FIN."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()


class _NanoTimer:
    """Callbacks at monotonic nanosecond times, woken by a timerfd on the
    loop (the loop's own timers round up to the millisecond); the loop's
    ``call_at`` where there is no timerfd."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._heap: list[tuple[int, int, object]] = []
        self._seq = itertools.count()
        self._armed_for: int | None = None
        self._firing = False
        self.fd = _timerfd_create()
        if self.fd is not None:
            loop.add_reader(self.fd, self._fire)

    def at(self, due_ns: int, callback) -> None:
        if self.fd is None:
            self.loop.call_at(self.loop.time() + (due_ns - time.monotonic_ns()) / 1e9, callback)
            return
        heapq.heappush(self._heap, (due_ns, next(self._seq), callback))
        if not self._firing and (self._armed_for is None or due_ns < self._armed_for):
            self._arm(due_ns)

    def _arm(self, due_ns: int) -> None:
        self._armed_for = due_ns
        _timerfd_settime(self.fd, max(due_ns, 1))

    def _fire(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass
        self._armed_for = None
        horizon = time.monotonic_ns() + SLACK_NS
        heap = self._heap
        self._firing = True
        try:
            while heap and heap[0][0] <= horizon:
                heapq.heappop(heap)[2]()
        finally:
            self._firing = False
        if heap:
            self._arm(heap[0][0])

    def close(self) -> None:
        if self.fd is not None:
            try:
                self.loop.remove_reader(self.fd)
            except Exception:  # noqa: BLE001 - the loop is closing anyway
                pass
            os.close(self.fd)
            self.fd = None


# -- timerfd through libc (os.timerfd_* arrive with Python 3.13) ---------------------------------
_CLOCK_MONOTONIC = 1
_TFD_CLOEXEC, _TFD_NONBLOCK, _TFD_TIMER_ABSTIME = 0o2000000, 0o4000, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.timerfd_create.argtypes = [ctypes.c_int, ctypes.c_int]
    _libc.timerfd_settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Itimerspec), ctypes.c_void_p]
except (OSError, AttributeError):
    _libc = None


def _timerfd_create() -> int | None:
    if _libc is None:
        return None
    fd = _libc.timerfd_create(_CLOCK_MONOTONIC, _TFD_CLOEXEC | _TFD_NONBLOCK)
    return fd if fd >= 0 else None


def _timerfd_settime(fd: int, due_ns: int) -> None:
    spec = _Itimerspec(_Timespec(0, 0), _Timespec(due_ns // 1_000_000_000, due_ns % 1_000_000_000))
    if _libc.timerfd_settime(fd, _TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
        raise OSError(ctypes.get_errno(), "timerfd_settime")
