"""A Spark task's read of a topic on object storage, cold and warm, beside the same on segment files.

    .venv/bin/python -m bench.spark_object_read [--rows 200000] [--size 100] [--repeat 3]

For each storage backend (``file``, then ``object``) it starts a one-broker
cluster (``magnetar cluster up --storage B``: its own etcd, with ``object``
its own SeaweedFS on loopback), writes ``rows`` messages of ``size`` bytes
with the official client, one message per entry (the Python client's
default) and in batches of up to 1,000, then times ``read_range`` of the
whole topic (what a Spark task runs, no Spark) in this process:

- cold: right after the topic was unloaded (its new load has an empty
  cache: ``object`` reads the entries by ranged GETs from the store);
- warm: the same read again (the entries now in the broker's caches).

Prints rows/s, this process's CPU and the broker's CPU per read (medians of
``--repeat``). A benchmark, not a test: record results with the command
line, the machine and its load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from magnetar_harness.cluster import LocalCluster


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _write(url: str, topic: str, rows: int, size: int, batched: bool) -> None:
    import pulsar

    client = pulsar.Client(url)
    try:
        producer = client.create_producer(topic, block_if_queue_full=True, max_pending_messages=10_000,
                                          batching_enabled=batched, batching_max_messages=1000,
                                          batching_max_publish_delay_ms=1)
        pad = b"x" * size
        for i in range(rows):
            producer.send_async((b"%d" % i + pad)[:size], None)
        producer.flush()
        producer.close()
    finally:
        client.close()


def _unload(admin_url: str, topic: str) -> None:
    path = topic.replace("persistent://", "persistent/")
    request = urllib.request.Request(f"{admin_url}/admin/v2/{path}/unload", method="PUT")
    urllib.request.urlopen(request, timeout=30).read()


def _read(url: str, topic: str, rows: int) -> None:
    from pyspark_magnetar.offsets import TopicPartition
    from pyspark_magnetar.options import read_options
    from pyspark_magnetar.ranges import OffsetRange, read_range

    opts = read_options({"service_url": url, "topic": topic}, streaming=False)
    got = sum(b.num_rows for b in read_range(OffsetRange(TopicPartition(topic), 0, rows), opts))
    assert got == rows, f"read {got} of {rows}"


def measure(storage: str, rows: int, size: int, repeat: int) -> None:
    with tempfile.TemporaryDirectory(prefix=f"magnetar-spark-object-{storage}-") as base:
        cluster = LocalCluster(Path(base), brokers=1, storage=storage, name=f"spark-bench-{storage}").start()
        try:
            member = cluster.members[0]
            for shape in ("unbatched", "batched"):
                topic = f"persistent://public/default/object-read-{shape}-{int(time.time())}"
                _write(member.service_url, topic, rows, size, shape == "batched")
                for kind in ("cold", "warm"):
                    seconds, cpu, broker = [], [], []
                    for _ in range(repeat):
                        if kind == "cold":
                            _unload(member.admin_url, topic)
                        start, start_cpu, start_broker = time.perf_counter(), time.process_time(), _cpu(member.pid)
                        _read(member.service_url, topic, rows)
                        seconds.append(time.perf_counter() - start)
                        cpu.append(time.process_time() - start_cpu)
                        broker.append(_cpu(member.pid) - start_broker)
                    median = statistics.median(seconds)
                    print(f"{storage:6s} {shape:9s} {kind}: {rows / median:>11,.0f} rows/s  (runs: "
                          f"{', '.join(f'{s:.2f}' for s in seconds)} s; reader CPU {statistics.median(cpu):.2f} s, "
                          f"broker CPU {statistics.median(broker):.2f} s)", flush=True)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.rows:,} rows of {args.size} B, one broker, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    for storage in ("file", "object"):
        measure(storage, args.rows, args.size, max(1, args.repeat))


if __name__ == "__main__":
    main()
