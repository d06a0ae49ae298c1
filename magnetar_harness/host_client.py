"""The official Pulsar client as a program on the client host of the test bed
(``python -m magnetar_harness.host_client produce|consume ...``, run with
``ip netns exec``): its sockets are the client host's, so it reaches the
brokers only by their addresses.

``produce`` sends ``--count`` messages ``<name>-<i>`` with one
deduplicating producer (a fixed producer name; the broker drops a retry
of a sequence id it already stored), ``--rate`` a second (0: as fast as
the acknowledgements come), and appends the sequence id of each
acknowledged message and the time of its receipt to ``--acked`` as it arrives, so a test can read how
far it got while it runs. It retries without end (send timeout 0): only
the test's end stops it. Its last line: ``DONE acked=N``.

``consume`` receives until it has ``--count`` distinct messages or
``--timeout`` seconds passed, acknowledging each, and prints one JSON
line: how many it received, how many distinct, the duplicates and the
order breaks per producer (a sequence number lower than one seen before).
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time


def _client(url: str, ca: str | None):
    import pulsar

    options = {"operation_timeout_seconds": 30}
    if ca:
        options["tls_trust_certs_file_path"] = ca
    return pulsar.Client(url, **options)


def produce(args: argparse.Namespace) -> int:
    import pulsar

    client = _client(args.url, args.ca)
    producer = client.create_producer(args.topic, producer_name=args.name, send_timeout_millis=0,
                                      batching_enabled=args.batching, block_if_queue_full=True)
    acked = open(args.acked, "a", buffering=1) if args.acked else None
    count = [0]
    lock = threading.Lock()

    def done(result, message_id, i) -> None:
        if result == pulsar.Result.Ok:
            with lock:
                count[0] += 1
                if acked:
                    acked.write(f"{i} {time.time():.3f}\n")

    interval = 1.0 / args.rate if args.rate > 0 else 0.0
    start = time.monotonic()
    for i in range(args.count):
        if interval:
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        producer.send_async(f"{args.name}-{i}".encode(), lambda r, m, i=i: done(r, m, i), sequence_id=i)
    producer.flush()
    print(f"DONE acked={count[0]}", flush=True)
    producer.close()
    client.close()
    return 0


def consume(args: argparse.Namespace) -> int:
    import pulsar

    client = _client(args.url, args.ca)
    consumer = client.subscribe(args.topic, args.subscription,
                                consumer_type=getattr(pulsar.ConsumerType, args.type),
                                initial_position=pulsar.InitialPosition.Earliest)
    seen: set[str] = set()
    received = duplicates = order_breaks = 0
    last: dict[str, int] = {}
    deadline = time.monotonic() + args.timeout
    while len(seen) < args.count and time.monotonic() < deadline:
        try:
            msg = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            continue
        text = msg.data().decode()
        received += 1
        if text in seen:
            duplicates += 1
        seen.add(text)
        name, _, n = text.rpartition("-")
        if int(n) < last.get(name, -1):
            order_breaks += 1
        last[name] = max(int(n), last.get(name, -1))
        consumer.acknowledge(msg)
    print(json.dumps({"received": received, "distinct": len(seen), "duplicates": duplicates,
                      "order_breaks": order_breaks, "missing": sorted(
                          _missing(seen, args.expect_names, args.count))[:20]}), flush=True)
    consumer.close()
    client.close()
    return 0


def _missing(seen: set[str], names: list[str] | None, count: int) -> set[str]:
    if not names:
        return set()
    per = count // len(names)
    return {f"{n}-{i}" for n in names for i in range(per)} - seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="host_client")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("produce")
    p.add_argument("--url", required=True)
    p.add_argument("--ca")
    p.add_argument("--topic", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--acked")
    p.add_argument("--batching", action="store_true")
    c = sub.add_parser("consume")
    c.add_argument("--url", required=True)
    c.add_argument("--ca")
    c.add_argument("--topic", required=True)
    c.add_argument("--subscription", required=True)
    c.add_argument("--type", default="Exclusive", choices=["Exclusive", "Shared", "Failover", "KeyShared"])
    c.add_argument("--count", type=int, required=True)
    c.add_argument("--timeout", type=float, default=60.0)
    c.add_argument("--expect-names", nargs="*")
    args = parser.parse_args(argv)
    return produce(args) if args.command == "produce" else consume(args)


if __name__ == "__main__":
    sys.exit(main())
