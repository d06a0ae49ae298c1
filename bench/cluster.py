"""A local cluster measured: lookups per second, failover time, produce throughput.

    .venv/bin/python -m bench.cluster [--brokers 3] [--messages 200000] [--session-ttl 3]

Starts ``magnetar cluster up`` (its own etcd, N brokers) in a temporary
directory and a standalone broker beside it, then prints:

- lookups/s answered by one broker (binary LOOKUP, 64 in flight on one
  connection, topics spread over the namespace's bundles: owner answers and
  redirects alike);
- seconds from ``kill -9`` of a broker that owns bundles to all of them owned
  again (session TTL + the leader's sweep);
- produce throughput of the official client (batching on, 100-byte messages,
  a 6-partition topic) against the cluster and against the standalone broker,
  same load, same machine.

A benchmark, not a test: record results with this command line.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.produce_throughput import run as produce
from magnetar.client.aio import AsyncClient
from magnetar.protocol import Type, command
from magnetar_harness.broker import standalone_broker
from magnetar_harness.cluster import LocalCluster
from magnetar_harness.waiting import wait_for


async def lookups_per_second(url: str, seconds: float = 5.0, in_flight: int = 64) -> float:
    client = AsyncClient(url)
    conn = await client.connection_to(url)
    done = 0
    stop = time.monotonic() + seconds

    async def worker(k: int) -> None:
        nonlocal done
        i = 0
        while time.monotonic() < stop:
            topic = f"persistent://public/default/lookup-{k}-{i % 16}"
            await conn.request(command(Type.LOOKUP, topic=topic, request_id=client.new_request_id()), 30)
            done += 1
            i += 1

    started = time.monotonic()
    await asyncio.gather(*(worker(k) for k in range(in_flight)))
    elapsed = time.monotonic() - started
    await client.close()
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--session-ttl", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="magnetar-cluster-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=args.brokers, session_ttl=args.session_ttl).start()
        try:
            b0 = cluster.members[0]
            rate = asyncio.run(lookups_per_second(b0.service_url))
            print(f"lookups answered by one broker: {rate:,.0f}/s (64 in flight, one connection)")
            cluster.admin(b0, "/admin/v2/persistent/public/default/bench/partitions", "PUT", 6)
            result = produce(b0.service_url, args.messages, 100, what="persistent://public/default/bench")
            print(f"cluster of {args.brokers}: produce {result['msgs_per_s']:,.0f} msg/s "
                  f"({args.messages} x 100 B, 6 partitions, official client, batching)")
            owners = cluster.owners()
            victim = next(m for m in cluster.members[1:] if m.broker_id in owners.values())
            lost = [b for b, o in owners.items() if o == victim.broker_id]
            killed = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            wait_for(lambda: all(cluster.owners()[b] not in (None, victim.broker_id) for b in lost), 60,
                     what="takeover")
            print(f"kill -9 of a broker owning {len(lost)} bundle(s): all owned again after "
                  f"{time.monotonic() - killed:.1f} s (session TTL {args.session_ttl} s)")
        finally:
            cluster.stop()
    with tempfile.TemporaryDirectory(prefix="magnetar-standalone-bench-") as tmp:
        broker = standalone_broker(Path(tmp) / "data").start()
        try:
            req = urllib.request.Request(broker.admin_url + "/admin/v2/persistent/public/default/bench/partitions",
                                         data=b"6", method="PUT", headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=30).read()
            result = produce(broker.service_url, args.messages, 100, what="persistent://public/default/bench")
            print(f"standalone: produce {result['msgs_per_s']:,.0f} msg/s (same load)")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
