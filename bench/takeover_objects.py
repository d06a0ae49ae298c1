"""A kill -9 takeover of many topics on object storage, end to end: how long
until every topic takes a message again (issue 41; the fences of
``storage/object/fence_batches.py`` and the commit-record scans of a
recovery on the path).

    .venv/bin/python -m bench.takeover_objects [--topics 1000] [--session-ttl 5] [--peer ROOT] [--repeats 1]

Per run: a two-broker cluster on object storage (``cluster up --storage
object``: its own etcd and SeaweedFS, load balancing off), ``--topics``
topics each with a producer of the official client (batching off) through
both brokers' addresses, a message sent to each and acknowledged; then
``kill -9`` of the broker owning most bundles and, at once, one more message
to every topic. Printed: the topics whose message waited (those the dead
broker owned), and from the kill to each one's receipt p50 / p99 / max
seconds, beside the session TTL (the floor: the dead broker's bundles are
free only once its session expires). ``--peer ROOT`` runs the same on
another checkout's code (built), in turns. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import threading
import time
from pathlib import Path

import pulsar

from magnetar_harness.cluster import LocalCluster


def one_run(topics: int, session_ttl: float, root: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="takeover-objects-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", brokers=2, session_ttl=session_ttl, storage="object",
                               broker_config="load_balancer_enabled = false\n", root=root).start()
        client = None
        try:
            url = "pulsar://" + ",".join(m.service_url.removeprefix("pulsar://") for m in cluster.members)
            client = pulsar.Client(url, operation_timeout_seconds=120, io_threads=2)
            names = [f"persistent://public/default/takeover-{i}" for i in range(topics)]
            producers = [client.create_producer(n, batching_enabled=False, send_timeout_millis=0) for n in names]
            _send_all(producers, time.monotonic())  # every topic has a ledger with an entry on its owner
            owners = cluster.owners()
            victim = max(cluster.members, key=lambda m: sum(1 for o in owners.values() if o == m.broker_id))
            killed = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            waits = sorted(_send_all(producers, killed))
            waited = [w for w in waits if w > session_ttl / 2]
            return {"topics": topics, "waited": len(waited),
                    "p50": statistics.median(waited) if waited else 0.0,
                    "p99": waited[int(0.99 * (len(waited) - 1))] if waited else 0.0,
                    "max": waits[-1], "over_30s": sum(1 for w in waited if w > 30)}
        finally:
            if client is not None:
                client.close()
            cluster.stop()


def _send_all(producers, since: float) -> list[float]:
    """One message to every producer; each receipt's seconds after ``since``."""
    done = threading.Condition()
    waits: list[float] = []
    errors: list[str] = []

    def receipt(result, _msg_id):
        with done:
            if result == pulsar.Result.Ok:
                waits.append(time.monotonic() - since)
            else:
                errors.append(str(result))
            done.notify()

    for producer in producers:
        producer.send_async(b"x" * 100, receipt)
    with done:
        if not done.wait_for(lambda: len(waits) + len(errors) == len(producers), timeout=600):
            raise RuntimeError(f"{len(producers) - len(waits) - len(errors)} sends unanswered after 600 s")
    if errors:
        raise RuntimeError(f"{len(errors)} sends failed, e.g. {errors[0]}")
    return waits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--session-ttl", type=float, default=5.0)
    ap.add_argument("--peer", default=None, help="a checkout (built) whose code runs in turns with this one")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    trees = [("this tree", None)] + ([("peer", args.peer)] if args.peer else [])
    for repeat in range(args.repeats):
        for name, root in (trees if repeat % 2 == 0 else list(reversed(trees))):
            row = one_run(args.topics, args.session_ttl, root)
            print(f"  [{name}] {row['topics']} topics, kill -9 of an owner: {row['waited']} topics waited; "
                  f"kill to receipt p50 {row['p50']:.2f} p99 {row['p99']:.2f} max {row['max']:.2f} s, "
                  f"{row['over_30s']} over 30 s "
                  f"(session TTL {args.session_ttl} s)", flush=True)


if __name__ == "__main__":
    main()
