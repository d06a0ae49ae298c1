"""Publish sample payment events to the ``payments`` topic.

    .venv/bin/python examples/spark/produce_events.py [--count 10000] [--rate 0]

Each event is JSON ``{"user": "u7", "amount": 12.5}``, keyed by user, with
the event time set (now, or spread over the last minute with --backfill).
--rate limits events per second (0: as fast as possible).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EVENTS, SERVICE_URL  # noqa: E402

from magnetar.client import Client  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--backfill", action="store_true", help="event times spread over the last minute")
    args = parser.parse_args()
    client = Client(SERVICE_URL)
    producer = client.create_producer(EVENTS, batching_enabled=True, max_pending_messages=10_000,
                                      block_if_queue_full=True)
    start = time.time()
    for i in range(args.count):
        user = f"u{random.randrange(args.users)}"
        now_ms = int(time.time() * 1000)
        event_ms = now_ms - random.randrange(60_000) if args.backfill else now_ms
        body = json.dumps({"user": user, "amount": round(random.uniform(1, 100), 2)}).encode()
        producer.send_async(body, None, partition_key=user, event_timestamp=event_ms)
        if args.rate and i % 100 == 99:
            ahead = (i + 1) / args.rate - (time.time() - start)
            if ahead > 0:
                time.sleep(ahead)
    producer.flush()
    client.close()
    print(f"published {args.count} events to {EVENTS} in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
