"""Round trips of the Pulsar protocol's PING/PONG to one broker: what a link
costs a client, without the storage behind the broker.

    .venv/bin/python -m bench.pulsar_ping pulsar://HOST:6650 [--count 200]

One connection (CONNECT, then ``--count`` PINGs, each sent once the PONG of
the one before arrived); prints one JSON line: the min, p50 and p90 round
trip in microseconds. hosts_latency runs it on the client host, straight
and through the link proxy, to show the proxy's delay is on the link.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import time

from magnetar.client.connection import parse_service_url
from magnetar.protocol import Connection, Role, Type, command


def round_trips(url: str, count: int) -> list[float]:
    host, port = parse_service_url(url)
    proto = Connection(Role.CLIENT)
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def until(kind) -> None:
            while True:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("the broker closed the connection")
                if any(frame.command.type == kind for frame in proto.receive_data(data)):
                    return
        sock.sendall(proto.send(command(Type.CONNECT, client_version="Magnetar-ping", auth_method_name="none",
                                        protocol_version=20)))
        until(Type.CONNECTED)
        ping = proto.send(command(Type.PING))
        out = []
        for _ in range(count):
            began = time.perf_counter()
            sock.sendall(ping)
            until(Type.PONG)
            out.append(time.perf_counter() - began)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    rtts = sorted(round_trips(args.url, args.count))
    print(json.dumps({"min_us": round(rtts[0] * 1e6), "p50_us": round(statistics.median(rtts) * 1e6),
                      "p90_us": round(rtts[int(len(rtts) * 0.9)] * 1e6)}))


if __name__ == "__main__":
    main()
