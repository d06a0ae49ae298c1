"""A broker's clean stop under load: with a drain (bundles moved first,
PIP-307) against the same stop without one (``drain_on_stop = false``).

    .venv/bin/python -m bench.restarts [--repeats 3] [--storage file,object]

For each storage and mode, ``--repeats`` times: a 3-broker cluster (``cluster
up``, its own etcd, and SeaweedFS for object storage), six deduplicated
producers of the official client (synchronous sends, 5 ms apart) through a
multi-host URL and a Failover consumer each (magnetar_harness/steady_load.py);
SIGTERM to the broker owning the most bundles; 2 s more of traffic once it
exited. Prints per run and as medians: send errors, lookups answered by all
brokers from the SIGTERM on (the stopping one read until it stops
answering), the worst send begun from 0.5 s before the SIGTERM to the end,
and messages acknowledged and not received. A benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from magnetar_harness.cluster import LocalCluster
from magnetar_harness.steady_load import LookupWatch, SteadyLoad, lookups_of
from magnetar_harness.waiting import wait_for

TOPICS = [f"persistent://public/default/bench-stop-{k}" for k in range(6)]


def one_stop(storage: str, drain: bool) -> dict:
    config = f"drain_on_stop = {str(drain).lower()}\nload_balancer_enabled = false\n"
    with tempfile.TemporaryDirectory(prefix="restarts-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "c", brokers=3, session_ttl=5.0, storage=storage,
                               broker_config=config).start()
        try:
            b0 = cluster.members[0]
            cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
            url = "pulsar://" + ",".join(m.service_url.removeprefix("pulsar://") for m in cluster.members)
            load = SteadyLoad(url, TOPICS).start()
            try:
                wait_for(lambda: load.messages_received() >= 300, 60, what="traffic flowing")
                time.sleep(3.0)  # the baseline window: steady traffic, nothing stopping
                owners = cluster.owners()
                victim = max(cluster.members, key=lambda m: sum(1 for o in owners.values() if o == m.broker_id))
                survivors = [m for m in cluster.members if m is not victim]
                watch = LookupWatch(victim.admin_url)
                before = sum(lookups_of(m.admin_url) or 0 for m in survivors) + watch.last
                t0 = time.monotonic()
                baseline = load.worst_send_ms(t0 - 3.0, t0 - 0.5)
                os.kill(victim.pid, signal.SIGTERM)
                wait_for(lambda: any(f"(pid {victim.pid}) exited" in line for line in cluster.output), 90,
                         what="the broker's exit")
                stopped = time.monotonic() - t0
                time.sleep(2.0)  # traffic after the stop: the clients' catch-up is in the window
                after = sum(lookups_of(m.admin_url) or 0 for m in survivors) + watch.final()
                worst = load.worst_send_ms(t0 - 0.5)
            finally:
                result = load.stop()
        finally:
            cluster.stop()
    return {"errors": len(result.errors), "lookups": after - before, "worst_ms": worst, "lost": result.lost,
            "sent": result.sent, "stop_s": stopped, "baseline_ms": baseline}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--storage", default="file,object")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    rows = []
    for storage in args.storage.split(","):
        for repeat in range(args.repeats):
            for drain in (True, False):  # interleaved: both modes see the same machine
                r = one_stop(storage, drain)
                mode = "drain" if drain else "no drain"
                print(f"{storage:6} {mode:8} #{repeat}: errors {r['errors']}, lookups {r['lookups']}, "
                      f"worst send {r['worst_ms']:.0f} ms (quiet 2.5 s before: {r['baseline_ms']:.0f} ms), "
                      f"lost {r['lost']}, stop took {r['stop_s']:.2f} s, "
                      f"{r['sent']} sent", flush=True)
                rows.append((storage, mode, r))
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("medians:")
    for storage in args.storage.split(","):
        for mode in ("drain", "no drain"):
            rs = [r for s, m, r in rows if s == storage and m == mode]
            print(f"{storage:6} {mode:8}: errors {statistics.median(r['errors'] for r in rs):g}, "
                  f"lookups {statistics.median(r['lookups'] for r in rs):g}, "
                  f"worst send {statistics.median(r['worst_ms'] for r in rs):.0f} ms "
                  f"(max {max(r['worst_ms'] for r in rs):.0f}; quiet window "
                  f"{statistics.median(r['baseline_ms'] for r in rs):.0f} ms), lost {sum(r['lost'] for r in rs)} in all, "
                  f"stop {statistics.median(r['stop_s'] for r in rs):.2f} s")


if __name__ == "__main__":
    main()
