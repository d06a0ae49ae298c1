"""A Spark job's cold read of topics on object storage, beside the same read on files, in one run.

    .venv/bin/python -m bench.spark_cold_read [--rows 200000] [--size 100] [--repeat 1] [--shapes batched,unbatched,lz4]

For each storage backend (``file``, then ``object``) it starts a one-broker
cluster (``magnetar cluster up --storage B``: its own etcd, with ``object``
its own SeaweedFS on loopback), writes the official client's topics of
:mod:`bench.spark_bench` (2 partitions each, ``rows`` messages of ``size``
bytes: batches of up to 1,000, one message per entry, LZ4 batches of keyed
messages with properties; untimed), then per repeat restarts the broker
(SIGTERM, started again by ``cluster up``: every cache of the broker is
empty, and on object storage every entry comes from the store) and reads
each topic once with Spark (``local[2]``, ``format("magnetar")`` into
``noop``, one task per partition). Spark's session is shared by both
backends and warmed up first on a small topic, so its start-up is not timed.

Prints per topic and backend the read's rows/s and MB/s (values' bytes),
the broker's CPU seconds, and (object) the ranged GETs the job took, its
planning included (``magnetar_object_gets_total``: of commit objects, and
of the chunks the loads' compactions wrote meanwhile,
``magnetar_object_chunk_gets_total``), beside the commit objects written
with the topic, then the ratio object / file per shape (medians of
repeats). A benchmark, not a test:
record results with the command line, the machine and its load.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.spark_bench import OFFICIAL_SHAPES, session, write_official
from magnetar_harness.cluster import LocalCluster


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def object_gets(cluster: LocalCluster) -> tuple[int, int]:
    """The broker's ranged GETs so far: of commit objects, of compacted
    chunks (0, 0 on files: no such series)."""
    text = urllib.request.urlopen(cluster.members[0].admin_url + "/metrics", timeout=30).read().decode()
    values = []
    for name in ("magnetar_object_gets_total", "magnetar_object_chunk_gets_total"):
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        values.append(int(float(found.group(1))) if found else 0)
    return values[0] - values[1], values[1]


def commit_objects(cluster: LocalCluster) -> set[str]:
    """Keys of the commit objects in the cluster's store (none on files)."""
    return set(cluster.object_keys("data/"))


def restart(cluster: LocalCluster, timeout: float = 120.0) -> None:
    """Restart the broker (:meth:`LocalCluster.restart_member`: a clean stop,
    then the same ports and files); returns once it answers a lookup."""
    member = cluster.restart_member(0, timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.admin(member, "/lookup/v2/topic/persistent/public/default/cold-read-probe")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def measure(spark, storage: str, rows: int, size: int, repeat: int, shapes: list[str], base: Path) -> dict:
    """Per shape: lists of (seconds, broker CPU s, GETs) over ``repeat`` cold reads."""
    cluster = LocalCluster(base / storage, brokers=1, storage=storage, session_ttl=10.0,
                           name=f"coldspark-{storage}").start(timeout=180)
    out: dict[str, dict] = {}
    try:
        member = cluster.members[0]
        topics, objects = {}, {}
        for shape in shapes:
            topic = f"persistent://public/default/cold-{shape}"
            began, known = time.perf_counter(), commit_objects(cluster)
            write_official(member.service_url, member.admin_url, topic, rows, size, shape)
            topics[shape] = topic
            objects[shape] = len(commit_objects(cluster) - known)  # the commit objects written with it
            print(f"{storage:6s} wrote {rows:,} rows, {shape}, in {time.perf_counter() - began:.1f} s", flush=True)
        for r in range(repeat):
            restart(cluster)
            for shape, topic in topics.items():
                pid, gets = cluster.members[0].pid, object_gets(cluster)
                url = cluster.members[0].service_url
                cpu, began = _cpu(pid), time.perf_counter()
                spark.read.format("magnetar").option("service_url", url).option("topic", topic) \
                    .option("minPartitions", "2").load().write.format("noop").mode("overwrite").save()
                seconds = time.perf_counter() - began
                after = object_gets(cluster)
                run = (seconds, _cpu(pid) - cpu, after[0] - gets[0], after[1] - gets[1])
                out.setdefault(shape, {"runs": []})["runs"].append(run)
                print(f"{storage:6s} {shape:9s} cold read {r + 1}: {rows / seconds:>10,.0f} rows/s "
                      f"{rows * size / seconds / 1e6:6.1f} MB/s in {seconds:5.2f} s, broker CPU {run[1]:.2f} s, "
                      f"GETs of commit objects {run[2]} (it wrote {objects.get(shape, 0)}), of chunks {run[3]} "
                      f"| load {os.getloadavg()[0]:.1f}", flush=True)
        count = spark.read.format("magnetar").option("service_url", cluster.members[0].service_url) \
            .option("topic", topics[shapes[0]]).load().count()
        assert count == rows, f"read {count} of {rows}"
    finally:
        cluster.stop()
    for shape, figures in out.items():
        runs = figures["runs"]
        figures["seconds"] = statistics.median(r[0] for r in runs)
        figures["broker_cpu"] = statistics.median(r[1] for r in runs)
        figures["gets"] = statistics.median(r[2] for r in runs)
        figures["chunk_gets"] = statistics.median(r[3] for r in runs)
        figures["objects"] = objects.get(shape, 0)
    return out


def warm_up(spark, base: Path, rows: int, size: int) -> None:
    """Spark's first jobs (workers, the source's lookup, the JVM's code) on a
    small topic of its own broker, untimed."""
    cluster = LocalCluster(base / "warm", brokers=1, name="coldspark-warm").start(timeout=180)
    try:
        member = cluster.members[0]
        topic = "persistent://public/default/cold-warm-up"
        write_official(member.service_url, member.admin_url, topic, rows, size, "batched")
        for _ in range(2):
            spark.read.format("magnetar").option("service_url", member.service_url).option("topic", topic) \
                .option("minPartitions", "2").load().write.format("noop").mode("overwrite").save()
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="cold reads (broker restarts) per backend")
    parser.add_argument("--shapes", default=",".join(OFFICIAL_SHAPES), help="official topic shapes, comma-separated")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    shapes = [s for s in args.shapes.split(",") if s]
    unknown = set(shapes) - set(OFFICIAL_SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}: choose from {', '.join(OFFICIAL_SHAPES)}")
    print(f"{args.rows:,} rows of {args.size} B per topic (2 partitions), {args.master}, one broker, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    spark = session(args.master)
    try:
        with tempfile.TemporaryDirectory(prefix="magnetar-coldspark-") as tmp:
            warm_up(spark, Path(tmp), min(args.rows, 50_000), args.size)
            results = {storage: measure(spark, storage, args.rows, args.size, max(1, args.repeat), shapes, Path(tmp))
                       for storage in ("file", "object")}
    finally:
        spark.stop()
    print(f"cold Spark reads, medians of {max(1, args.repeat)} (MB/s of values) | load {os.getloadavg()[0]:.1f}")
    for shape in shapes:
        f, o = results["file"][shape], results["object"][shape]
        print(f"  {shape:9s} file {args.rows / f['seconds']:>10,.0f} rows/s {args.rows * args.size / f['seconds'] / 1e6:6.1f} MB/s"
              f" | object {args.rows / o['seconds']:>10,.0f} rows/s {args.rows * args.size / o['seconds'] / 1e6:6.1f} MB/s,"
              f" GETs {o['gets']:.0f} of {o['objects']} commit objects, {o['chunk_gets']:.0f} of chunks"
              f" | object / file {f['seconds'] / o['seconds']:.2f}", flush=True)


if __name__ == "__main__":
    main()
