"""How fast our blocking Reader reads a topic back (has_message_available + read_next).

    .venv/bin/python -m bench.blocking_reader [--messages 50000] [--read-ahead 500]

Starts a standalone broker on free ports in a temporary directory, fills one
topic with batched 100-byte-ish messages, then times a blocking reader from
the earliest message to the end. Each blocking call costs a hop to the
client's loop thread; ``--read-ahead 1`` shows what one hop per message
costs (the reader's behaviour before it brought messages back in bulk).
This is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import time

from bench.servers import magnetar_broker
from magnetar.client import Client, MessageId
from magnetar.client.sync import Reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--read-ahead", type=int, default=Reader.READ_AHEAD)
    args = parser.parse_args()
    with magnetar_broker() as (url, _pid):
        client = Client(url)
        producer = client.create_producer("read-back", batching_enabled=True, batching_max_messages=500,
                                          block_if_queue_full=True, max_pending_messages=5000)
        for i in range(args.messages):
            producer.send_async(b"message-%d" % i, None)
        producer.flush()
        reader = client.create_reader("read-back", MessageId.earliest, receiver_queue_size=2000)
        reader.READ_AHEAD = args.read_ahead
        start, count = time.perf_counter(), 0
        while reader.has_message_available():
            reader.read_next(5000)
            count += 1
        elapsed = time.perf_counter() - start
        client.close()
    print(f"blocking reader, read-ahead {args.read_ahead}: {count:,} messages in {elapsed:.2f} s "
          f"= {count / elapsed:,.0f} msg/s")


if __name__ == "__main__":
    main()
