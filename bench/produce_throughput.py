"""Produce throughput with the official pulsar-client: batching on, 100-byte messages.

    .venv/bin/python -m bench.produce_throughput [--messages 1000000] [--size 100] [--url pulsar://...]

Without --url it starts a standalone broker on free ports in a temporary data
directory (default sync policy: fsync before every receipt, group commit),
runs the workload, prints msgs/s and MB/s, and stops the broker. This is a
benchmark, not a test: record results with the command line in bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import threading
import time

import pulsar

from bench.servers import magnetar_broker


def run(url: str, messages: int, size: int, topic: str) -> dict:
    client = pulsar.Client(url, operation_timeout_seconds=30)
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=1024 * 1024,
        batching_max_publish_delay_ms=5,
        max_pending_messages=20_000,
        block_if_queue_full=True,
    )
    payload = b"x" * size
    done = threading.Event()
    remaining = [messages]
    failures = [0]
    lock = threading.Lock()

    def callback(res, _msg_id):
        with lock:
            if res != pulsar.Result.Ok:
                failures[0] += 1
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

    start = time.perf_counter()
    for _ in range(messages):
        producer.send_async(payload, callback)
    producer.flush()
    done.wait()
    elapsed = time.perf_counter() - start
    client.close()
    return {
        "messages": messages,
        "size": size,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(messages / elapsed),
        "mb_per_s": round(messages * size / elapsed / 1e6, 2),
        "failures": failures[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--url", default=None, help="use a running broker instead of starting one")
    parser.add_argument("--sync-policy", default="always", choices=["always", "interval", "never"])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with magnetar_broker(args.url, args.sync_policy) as (url, _pid):
        result = run(url, args.messages, args.size, f"bench-{int(time.time())}")
    result["sync_policy"] = args.sync_policy if args.url is None else "external"
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['messages']} x {result['size']} B in {result['seconds']} s: "
              f"{result['msgs_per_s']:,} msg/s, {result['mb_per_s']} MB/s, {result['failures']} failures "
              f"(sync policy {result['sync_policy']})")


if __name__ == "__main__":
    main()
