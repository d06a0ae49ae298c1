"""What stats and /metrics cost per loaded topic, without a broker: CPU of
one per-topic /metrics exposition (``admin/topic_exposition.py``) and of one
stats sampling round (``broker/topics/stats_sampling.py``) over N topics of
one producer, one subscription and one consumer each (plain objects with the
attributes those modules read).

    .venv/bin/python -m bench.stats_cost --topics 100000
    PYTHONPATH=OLD_CHECKOUT .venv/bin/python -m bench.stats_cost --topics 100000 --exposition-only

The second line measures another checkout's exposition (its code first on
the path) beside this one's in the same run: the peer of the figures in
bench/README.md. Medians of ``--repeats`` process-CPU timings.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from types import SimpleNamespace as NS


def _rates(n: int):
    try:
        from magnetar.broker.interval_rates import IntervalRates
    except ImportError:  # a checkout from before interval rates: its exposition reads none
        return None
    return IntervalRates(n)


def _topic(i: int):
    from magnetar.storage import Position
    from magnetar.storage.entry import LedgerInfo
    from magnetar.broker.topic_name import parse

    consumer = NS(msg_out=i, bytes_out=i, redelivered=0, acked=i, interval_rates=_rates(4),
                  unacked_messages=lambda: 4)
    sub = NS(name="s0", msg_out=i, bytes_out=i, redelivered=0, acked=i, expired=0, consumers=[consumer],
             interval_rates=_rates(5), backlog=lambda: 1, durable=True, dispatcher=None,
             cursor=NS(mark_delete_position=Position(1, 0)), last_acked_ms=0, last_consumed_ms=0)
    producer = NS(msg_in=i, bytes_in=i, interval_rates=_rates(2))
    return NS(name=parse(f"persistent://t/ns{i % 3}/topic-{i}"), msg_in=i, bytes_in=100 * i, msg_out=i, bytes_out=i,
              producers={"p": producer}, subscriptions={"s0": sub}, interval_rates=_rates(4), backlog_quotas=[],
              ledger=NS(total_size=2_000_000 + i, ledgers=[LedgerInfo(1, 10, 1000, 0.0, "Open")]))


async def exposition(topics: dict, repeats: int) -> dict:
    from magnetar.admin.pulsar_metrics import PulsarCollector
    from magnetar.admin.topic_exposition import TopicExposition

    broker = NS(service=NS(topics=topics), config=NS(cluster_name="c1"))
    expo = TopicExposition(broker, PulsarCollector(broker))
    times, size = [], 0
    for _ in range(repeats):
        started = time.process_time()
        size = sum([len(chunk) async for chunk in expo.chunks()])
        times.append(time.process_time() - started)
    return {"exposition_cpu_s": round(statistics.median(times), 3), "exposition_bytes": size}


async def sampling(topics: dict, repeats: int) -> dict:
    from magnetar.broker.topics.stats_sampling import sample_all

    times = []
    for _ in range(repeats):
        started = time.process_time()
        await sample_all(topics)
        times.append(time.process_time() - started)
    return {"sampling_round_cpu_s": round(statistics.median(times), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--exposition-only", action="store_true", help="skip the sampling round (older checkouts)")
    args = parser.parse_args()
    topics = {str(t.name): t for t in (_topic(i) for i in range(args.topics))}
    result = {"topics": args.topics, **asyncio.run(exposition(topics, args.repeats))}
    if not args.exposition_only:
        result.update(asyncio.run(sampling(topics, args.repeats)))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
