"""What idempotence costs: our client's plain vs idempotent producer on the same broker.

    .venv/bin/python -m bench.idempotent_overhead [--messages 500000] [--rounds 3] [--size 100] [--url pulsar://...]

Batching on, 100-byte messages, up to ``--window`` messages in flight. The
plain and the idempotent producer take turns (plain, idempotent, plain, ...)
on fresh topics of one broker, so drift in the machine's speed hits both
alike; each side's best round is compared. On a shared machine single
rounds vary a lot, so the CPU time spent per message (client process +
broker process, median of the rounds) is reported too: it is what a loaded
machine distorts least. Without --url a standalone broker
is started on free ports in a temporary directory (default sync policy:
fsync before every receipt, group commit) and stopped at the end.

Idempotence adds, per *entry* (a batch), three metadata fields on the client
and one sequence check in the broker's append path; the target is an
overhead within 10 %. This is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import deque
from pathlib import Path

from bench.servers import magnetar_broker
from magnetar.client import AsyncClient


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds used so far by process ``pid`` (0 if unknown)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def produce(url: str, topic: str, *, idempotent: bool, messages: int, size: int, window: int,
                  broker_pid: int | None) -> tuple[float, float, float]:
    """One run: (messages per second, client CPU µs per message, broker CPU µs
    per message), from the first send to the last receipt. CPU time is what
    a loaded machine distorts least."""
    client = AsyncClient(url, operation_timeout_seconds=60)
    producer = await client.create_producer(
        topic, idempotent=idempotent, batching_enabled=True, batching_max_messages=1000,
        batching_max_allowed_size_in_bytes=1024 * 1024, batching_max_publish_delay_ms=5,
        max_pending_messages=window, send_timeout_millis=0,
    )
    payload = b"x" * size
    in_flight: deque = deque()
    start = time.perf_counter()
    cpu, broker_cpu = time.process_time(), _cpu_seconds(broker_pid)
    for _ in range(messages):
        if len(in_flight) >= window:
            await in_flight.popleft()  # receipts come in order: the oldest settles first
        in_flight.append(producer.send_nowait(payload))
    await producer.flush()
    for fut in in_flight:
        fut.result()  # raises if a send failed
    elapsed = time.perf_counter() - start
    cpu, broker_cpu = time.process_time() - cpu, _cpu_seconds(broker_pid) - broker_cpu
    await client.close()
    return messages / elapsed, cpu / messages * 1e6, broker_cpu / messages * 1e6


async def compare(url: str, messages: int, size: int, rounds: int, window: int, broker_pid: int | None) -> dict:
    runs: dict[str, list[tuple[float, float, float]]] = {"plain": [], "idempotent": []}
    stamp = int(time.time())
    for r in range(rounds):
        for kind in ("plain", "idempotent"):
            run = await produce(url, f"bench-{kind}-{stamp}-{r}", idempotent=kind == "idempotent",
                                messages=messages, size=size, window=window, broker_pid=broker_pid)
            runs[kind].append(run)
            print(f"  round {r + 1} {kind:>10}: {run[0]:,.0f} msg/s, CPU per message: client {run[1]:.2f} µs,"
                  f" broker {run[2]:.2f} µs", file=sys.stderr, flush=True)

    def best(kind: str) -> float:
        return max(rate for rate, _, _ in runs[kind])

    def cpu(kind: str) -> float:  # client + broker CPU per message, median of the rounds
        return statistics.median(c + b for _, c, b in runs[kind])

    plain, idem = best("plain"), best("idempotent")
    result = {
        "messages": messages, "size": size, "rounds": rounds, "window": window,
        "plain_msgs_per_s": round(plain), "idempotent_msgs_per_s": round(idem),
        "overhead_pct": round((plain - idem) / plain * 100, 1),
        "runs": {k: [round(rate) for rate, _, _ in vs] for k, vs in runs.items()},
    }
    if broker_pid is not None:
        result.update(plain_cpu_us_per_msg=round(cpu("plain"), 2), idempotent_cpu_us_per_msg=round(cpu("idempotent"), 2),
                      cpu_overhead_pct=round((cpu("idempotent") - cpu("plain")) / cpu("plain") * 100, 1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=500_000, help="per run")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=20_000, help="most messages in flight")
    parser.add_argument("--url", default=None, help="use a running broker instead of starting one")
    parser.add_argument("--sync-policy", default="always", choices=["always", "interval", "never"])
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    with magnetar_broker(args.url, args.sync_policy) as (url, pid):
        result = asyncio.run(compare(url, args.messages, args.size, args.rounds, args.window, pid))
    result["sync_policy"] = args.sync_policy if args.url is None else "external"
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['messages']:,} x {result['size']} B per run, best of {result['rounds']}: "
              f"plain {result['plain_msgs_per_s']:,} msg/s, idempotent {result['idempotent_msgs_per_s']:,} msg/s, "
              f"overhead {result['overhead_pct']} % (sync policy {result['sync_policy']})")
        if "cpu_overhead_pct" in result:
            print(f"CPU (client + broker) per message, median: plain {result['plain_cpu_us_per_msg']} µs, "
                  f"idempotent {result['idempotent_cpu_us_per_msg']} µs, overhead {result['cpu_overhead_pct']} %")


if __name__ == "__main__":
    main()
