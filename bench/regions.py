"""Geo-replication between two local regions: lag, and what snapshots cost.

    .venv/bin/python -m bench.regions [--rates 10000,50000] [--failover-rates 1000,5000] [--seconds 10]

Starts ``magnetar geo up --regions 2`` (one broker per region, its own etcd)
and, for each rate, publishes 100-byte messages in region-0 (official client,
batching on) while a consumer in region-1 measures each message's
replication lag: receive time minus the producer's publish time. Prints p50,
p99 and max per rate, and whether every message arrived once.

Then failover of a replicated subscription, for each of ``--failover-rates``:
a consumer in region-0 acknowledges half of ``--seconds`` of traffic and
leaves; once region-1 has applied every update region-0 wrote, a consumer
subscribes there with the same name. Prints how many acknowledged messages
it receives again, that count in seconds of traffic ("repeats after
failover per second of traffic": the PIP-33 goal is at most about 1 s), and
how long updates took to reach region-1 (topic stats' counters sampled
every 10 ms).

Then the cost of replicated subscriptions: region-0's broker CPU seconds over
the same traffic (1,000 msg/s) with a plain subscription and with a
replicated one (snapshots every second), and the difference per second. A
benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import pulsar

from magnetar_harness.regions import LocalRegions

PAYLOAD = b"x" * 100


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _publish(producer, rate: int, seconds: float) -> int:
    total = int(rate * seconds)
    start = time.monotonic()
    for i in range(total):
        producer.send_async(PAYLOAD, None)
        if i % 500 == 499:
            ahead = start + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    producer.flush()
    return total


def lag(regions: LocalRegions, rate: int, seconds: float) -> dict:
    a, b = regions.regions
    topic = f"persistent://geo/bench/lag-{rate}"
    src, dst = pulsar.Client(a.service_url), pulsar.Client(b.service_url)
    try:
        consumer = dst.subscribe(topic, "lag", receiver_queue_size=5000)
        producer = src.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=1,
                                       block_if_queue_full=True, max_pending_messages=20000)
        lags: list[float] = []
        total = int(rate * seconds)

        def receive() -> None:
            while len(lags) < total:
                try:
                    msg = consumer.receive(10_000)
                except pulsar.Timeout:
                    return
                lags.append(time.time() * 1000 - msg.publish_timestamp())
                consumer.acknowledge(msg)

        receiver = threading.Thread(target=receive)
        receiver.start()
        _publish(producer, rate, seconds)
        receiver.join(120)
        lags.sort()
        return {"rate": rate, "sent": total, "received": len(lags),
                "p50_ms": _percentile(lags, 0.5), "p99_ms": _percentile(lags, 0.99), "max_ms": lags[-1]}
    finally:
        src.close()
        dst.close()


def _counter(region, path: str, name: str) -> int:
    try:
        return region.admin(f"{path}/stats").get("replicatedSubscriptions", {}).get(name, 0)
    except Exception:  # not loaded there yet
        return 0


def _sample_updates(a, b, path: str, stop: threading.Event, delays: list[float]) -> None:
    """Append, for each update region-0 writes, how long until region-1 applied it (10 ms sampling)."""
    sent_at: dict[int, float] = {}
    applied = 0
    while not stop.is_set():
        now = time.monotonic()
        for v in range(len(sent_at) + 1, _counter(a, path, "updatesSent") + 1):
            sent_at[v] = now
        done = _counter(b, path, "updatesApplied")
        now = time.monotonic()
        for v in range(applied + 1, done + 1):
            if v in sent_at:
                delays.append(now - sent_at[v])
        applied = max(applied, done)
        time.sleep(0.01)


def failover(regions: LocalRegions, rate: int, seconds: float) -> dict:
    """Acknowledge half the traffic in region-0, fail over to region-1; count
    the acknowledged messages delivered again there."""
    a, b = regions.regions
    local = f"failover-{rate}"
    topic, path = f"persistent://geo/bench/{local}", f"/admin/v2/persistent/geo/bench/{local}"
    total, acked = int(rate * seconds), int(rate * seconds) // 2
    src, dst = pulsar.Client(a.service_url), pulsar.Client(b.service_url)
    stop, delays = threading.Event(), []
    sampler = threading.Thread(target=_sample_updates, args=(a, b, path, stop, delays))
    try:
        consumer = src.subscribe(topic, "billing", replicate_subscription_state_enabled=True,
                                 initial_position=pulsar.InitialPosition.Earliest, receiver_queue_size=1000)
        sampler.start()
        producer = src.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
        publisher = threading.Thread(target=lambda: _publish_numbered(producer, rate, total))
        publisher.start()
        for i in range(acked):
            msg = consumer.receive(30_000)
            assert int(msg.data()[:10]) == i, "out of order"
            consumer.acknowledge(msg)
        consumer.close()  # flushes the grouped acknowledgements
        publisher.join(seconds * 4 + 60)
        # Region-1 has applied every update region-0 wrote (bounded wait), then fail over.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and \
                _counter(b, path, "updatesApplied") < _counter(a, path, "updatesSent"):
            time.sleep(0.05)
        stop.set()
        sampler.join()
        failed_over = dst.subscribe(topic, "billing", replicate_subscription_state_enabled=True)
        first = int(failed_over.receive(30_000).data()[:10])
        seen_again = max(0, acked - first)
        delays.sort()
        return {"rate": rate, "acked": acked, "seen_again": seen_again, "seconds_of_traffic": seen_again / rate,
                "updates": len(delays), "update_p50_ms": _percentile(delays, 0.5) * 1000 if delays else float("nan"),
                "update_max_ms": delays[-1] * 1000 if delays else float("nan")}
    finally:
        stop.set()
        src.close()
        dst.close()


def _publish_numbered(producer, rate: int, total: int) -> None:
    start = time.monotonic()
    for i in range(total):
        producer.send_async(f"{i:010d}".encode().ljust(len(PAYLOAD), b"x"), None)
        if i % 100 == 99:
            ahead = start + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    producer.flush()


def snapshot_cost(regions: LocalRegions, seconds: float) -> dict:
    a = regions.regions[0]
    out = {}
    client = pulsar.Client(a.service_url)
    try:
        for replicated in (False, True):
            topic = f"persistent://geo/bench/cost-{'replicated' if replicated else 'plain'}"
            consumer = client.subscribe(topic, "s", replicate_subscription_state_enabled=replicated)
            producer = client.create_producer(topic, batching_enabled=False, block_if_queue_full=True)
            stop = threading.Event()

            def drain() -> None:
                while not stop.is_set():
                    try:
                        consumer.acknowledge(consumer.receive(200))
                    except pulsar.Timeout:
                        pass

            drainer = threading.Thread(target=drain)
            drainer.start()
            before = _cpu_seconds(a.pid)
            _publish(producer, 1000, seconds)
            out["replicated" if replicated else "plain"] = _cpu_seconds(a.pid) - before
            stop.set()
            drainer.join()
    finally:
        client.close()
    out["snapshot_cpu_ms_per_s"] = (out["replicated"] - out["plain"]) / seconds * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10000,50000")
    parser.add_argument("--failover-rates", default="1000,5000")
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        regions = LocalRegions(Path(tmp) / "geo", regions=2).start()
        try:
            names = [r.name for r in regions.regions]
            regions.regions[0].admin("/admin/v2/tenants/geo", "PUT", {"allowedClusters": names})
            regions.regions[0].admin("/admin/v2/namespaces/geo/bench", "PUT", {"replication_clusters": names})
            print(f"{'rate msg/s':>10} {'sent':>8} {'received':>9} {'lag p50 ms':>11} {'p99 ms':>8} {'max ms':>8}")
            for rate in (int(r) for r in args.rates.split(",")):
                r = lag(regions, rate, args.seconds)
                print(f"{r['rate']:>10} {r['sent']:>8} {r['received']:>9} {r['p50_ms']:>11.1f} "
                      f"{r['p99_ms']:>8.1f} {r['max_ms']:>8.1f}", flush=True)
            print(f"{'failover at msg/s':>17} {'acked':>7} {'seen again':>11} {'= s of traffic':>15} "
                  f"{'updates':>8} {'update delay p50 ms':>20} {'max ms':>7}")
            for rate in (int(r) for r in args.failover_rates.split(",")):
                f = failover(regions, rate, args.seconds)
                print(f"{f['rate']:>17} {f['acked']:>7} {f['seen_again']:>11} {f['seconds_of_traffic']:>15.2f} "
                      f"{f['updates']:>8} {f['update_p50_ms']:>20.0f} {f['update_max_ms']:>7.0f}", flush=True)
            cost = snapshot_cost(regions, args.seconds)
            print(f"broker CPU at 1,000 msg/s over {args.seconds:.0f} s: plain subscription {cost['plain']:.2f} s, "
                  f"replicated {cost['replicated']:.2f} s; snapshots cost about "
                  f"{cost['snapshot_cpu_ms_per_s']:.1f} ms of CPU per second")
        finally:
            regions.stop()


if __name__ == "__main__":
    main()
