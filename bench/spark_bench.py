"""Spark connector throughput with local[2]: batch write, batch read, streaming.

    .venv/bin/python -m bench.spark_bench [--rows 1000000] [--size 100] [--tasks 2] [--repeat 3] [--url pulsar://...]
                                          [--conf spark.key=value ...] [--only official|own]

On a shared machine, write the official client's topics once, outside the
timed part (writing 1,000,000 messages one per entry takes minutes), and
time the reads later against the same broker:

    magnetar standalone ... (deduplication_enabled = true)
    .venv/bin/python -m bench.spark_bench --url URL --admin-url ADMIN --write-official NAME
    .venv/bin/python -m bench.spark_bench --url URL --admin-url ADMIN --broker-pid PID --official-topics NAME --only official

Without --url it starts a standalone broker (deduplication on, as the
exactly-once sink expects; default sync policy "always") on free ports in a
temporary directory. Workloads, each timed around one Spark action (the
SparkSession is started and every shape of job, streaming queries
included, is run once on a smaller topic first, so start-up and the JVM's
warm-up are excluded):

Topics the official client wrote (first; ``--only official``): three
topics of 2 partitions, ``rows`` messages of ``size`` bytes each, written
by ``pulsar-client`` as users' producers write them (untimed):

- official batched:   batches of up to 1,000 messages, 1 ms (the Java client's defaults)
- official unbatched: one message per entry (the Python client's default)
- official lz4:       LZ4 batches of keyed messages with 2 properties each

each read into Spark's ``noop`` sink (one task per partition) beside the
source ceiling, and the unbatched one copied by a stream (AvailableNow,
exactly-once sink, 5 micro-batches) beside the stream copy ceiling; then
a batch write beside the sink ceiling. Each read is also measured beside
the same rows' ceiling: the source ceiling yielding, over and over, the
shape's first record batch as the connector decoded it (saved untimed:
its topic and producer names, keys, properties and batch size, which cost
Spark more or less than the synthetic batch's). Each workload runs in
turns with its ceilings (workload, ceilings, then the ceilings reversed,
workload, ...: ``--repeat`` rounds), and each share is the median over the
rounds of the runs' ratio, so a load that drifts during the bench slows
every side of a share alike. The
broker's CPU seconds per run are printed beside each (when the bench
started it): it shares the machine's cores with Spark.

The connector's own topic (``--only own``):

- batch write:  ``spark.range(rows)`` -> ``value`` of ``size`` bytes -> topic A
- sink ceiling: the same rows into a Python data source that drops them
                (:mod:`bench.spark_ceilings`): what Spark's Python writer
                path carries when the connector costs nothing
- parquet read: the same rows written to Parquet first (untimed), read
                into Spark's ``noop`` sink: the yardstick, in the same run
- batch read:   topic A -> Spark's ``noop`` sink (every row materialized),
                ``minPartitions`` = --tasks (topic A is one partition)
- source ceiling: a Python data source yielding prebuilt batches of the
                read schema into ``noop`` (:mod:`bench.spark_ceilings`):
                what Spark's Python reader path carries
- real-batch ceiling: the same, yielding the connector's own first batch of
                topic A over and over: the ceiling for batches of the
                connector's shape (below the source ceiling: the shape
                costs Spark more; near it: the gap is the connector's work)
- read_range / write_task alone: one task's read of the same rows and
                write of as many, in the bench's own process without Spark
                (wall time and CPU): the connector's own cost; and the
                write into a topic of 4 partitions (keys routed by hash)
- stream read:  topic A as a stream, Trigger.AvailableNow, 5 micro-batches
                (maxOffsetsPerTrigger = rows/5, minPartitions = --tasks) -> ``noop``
- stream copy:  the same stream -> magnetar sink into topic B (read, write,
                exactly-once identities), 5 micro-batches
- stream ceiling / stream copy ceiling: the same two queries with the
                ceiling source streaming prebuilt batches (and, for the
                copy, into the ceiling sink): what Spark's Python streaming
                path costs per query and per micro-batch with no connector

Only the batch write (``--only write``): the write beside the sink
ceiling, timed run by run between them, with the broker's user and system
CPU per write; ``--peer ROOT`` also starts a broker running the checkout at
ROOT (its .venv) and interleaves the same writes into it, and
``--peer-config TOML`` adds settings to that broker's config (ROOT may be
this tree: ``--peer . --peer-config '[storage] journal_direct_bytes = 0'``).
``--cold`` (as root) syncs, drops the page cache and waits 5 s before each
timed write and sink run, so free pages are handed back (on a VM that
reports them to its host, the next write's pages are new); each write's
pages allocated (``/proc/vmstat`` ``pgalloc_*``, the whole machine's) are
printed beside its broker's CPU.

Each workload runs --repeat times (writes into a fresh topic each time,
streams from a fresh checkpoint); the median run is reported, with every
run's seconds. Prints rows/s per workload, and each as a share of its
ceiling (the rest of their time is the connector's and the broker's).
This is a benchmark, not a test: record results with the command line, the
machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from magnetar_harness.broker import standalone_broker

REPO = Path(__file__).resolve().parents[1]


def session(master: str, conf: dict[str, str] | None = None):
    # Python workers: this interpreter, and the repository on sys.path so Spark
    # finds pyspark_magnetar by itself.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("magnetar-spark-bench")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


#: The broker's pid when the bench started it: its CPU is printed per workload.
BROKER_PID: int | None = None


def broker_cpu() -> float:
    """CPU seconds the bench's broker has used (0 without one)."""
    return sum(cpu_split(BROKER_PID))


def cpu_split(pid: int | None) -> tuple[float, float]:
    """(user, system) CPU seconds process ``pid`` has used ((0, 0) without one)."""
    if pid is None:
        return 0.0, 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def pages_allocated() -> int:
    """The machine's pages allocated so far (/proc/vmstat pgalloc_*)."""
    total = 0
    for line in Path("/proc/vmstat").read_text().splitlines():
        if line.startswith("pgalloc_"):
            total += int(line.split()[1])
    return total


def drop_caches() -> None:
    """``--cold``: sync, drop the page cache, dentries and inodes, wait 5 s
    (free pages get reported to the host meanwhile). Needs root."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    time.sleep(5)


def _run(fn, i: int) -> tuple[float, float, float]:
    """One run of ``fn(i)``: its wall seconds, this process's CPU seconds and the broker's."""
    start, start_cpu, start_broker = time.perf_counter(), time.process_time(), broker_cpu()
    fn(i)
    return time.perf_counter() - start, time.process_time() - start_cpu, broker_cpu() - start_broker


def _summary(label: str, rows: int, runs: list[tuple[float, float, float]], cpu: bool = False) -> dict:
    """The median run of ``runs`` (from :func:`_run`) as a result, printed."""
    seconds = [r[0] for r in runs]
    median = statistics.median(seconds)
    result = {"workload": label, "rows": rows, "seconds": round(median, 2), "rows_per_s": round(rows / median),
              "runs_s": [round(x, 2) for x in seconds]}
    listed = ", ".join(f"{x:.2f}" for x in seconds)
    broker = ""
    if BROKER_PID is not None:
        result["broker_cpu_s"] = round(statistics.median(r[2] for r in runs), 2)
        broker = f", broker CPU {result['broker_cpu_s']:.2f} s"
    print(f"{label:20s} {rows:>9,} rows in {median:5.2f} s: {result['rows_per_s']:>9,} rows/s  (runs: {listed} s{broker})",
          flush=True)
    if cpu:
        result["cpu_s"] = round(statistics.median(r[1] for r in runs), 2)
        print(f"{'':20s} CPU {result['cpu_s']:.2f} s (median)", flush=True)
    return result


def timed(label: str, rows: int, fn, repeat: int, cpu: bool = False) -> dict:
    """Run ``fn(i)`` for i in range(repeat); the median run's rows/s (a
    one-shot figure on 2 CPUs shared with a JVM varies by tens of percent).
    With ``cpu``, also this process's median CPU seconds (its threads included).
    The broker's median CPU seconds, when the bench knows the broker's pid."""
    return _summary(label, rows, [_run(fn, i) for i in range(repeat)], cpu)


def interleaved(label: str, rows: int, fn, ceilings: list[tuple[str, object]], repeat: int) -> list[dict]:
    """``fn`` and its ceilings (``(label, fn)`` pairs) run in turns,
    ``repeat`` rounds, each round in the reverse order of the one before
    (workload, ceilings..., then ceilings reversed, workload), so a load
    that drifts during the bench slows every side of a share alike.
    Returns the workload's result then each ceiling's; the workload's has
    ``shares`` (ceiling label -> the median over the rounds of ceiling
    seconds / workload seconds, each round's runs side by side) and
    ``share``, the first ceiling's; each printed beside the share of the
    two medians."""
    runs: list[list] = [[] for _ in range(1 + len(ceilings))]
    fns = [fn, *(c for _, c in ceilings)]
    for i in range(repeat):
        order = range(len(fns)) if i % 2 == 0 else reversed(range(len(fns)))
        for k in order:
            runs[k].append(_run(fns[k], i))
    results = [_summary(label, rows, runs[0])]
    results += [_summary(name, rows, runs[k + 1]) for k, (name, _) in enumerate(ceilings)]
    shares = {}
    for k, (name, _) in enumerate(ceilings):
        shares[name] = round(statistics.median(c[0] / r[0] for r, c in zip(runs[0], runs[k + 1])), 3)
        print(f"{label} / {name}: {shares[name]:.0%} (median of {repeat} rounds; of the medians "
              f"{results[0]['rows_per_s'] / results[k + 1]['rows_per_s']:.0%})", flush=True)
    results[0]["shares"] = shares
    results[0]["share"] = shares[ceilings[0][0]]
    return results


def connector_alone(url: str, topic: str, rows: int, size: int, repeat: int,
                    admin_url: str | None = None) -> list[dict]:
    """One task's work without Spark, in this process: ``read_range`` of
    the topic's first ``rows`` offsets, and ``write_task`` of ``rows`` rows
    (Arrow batches of 10,000, Spark's default) into a fresh topic; with
    ``admin_url``, also into a fresh topic of 4 partitions (keys routed by
    hash). Prints this process's CPU seconds (the session's loop thread
    included) beside the wall time."""
    import pyarrow as pa

    from pyspark_magnetar.offsets import TopicPartition
    from pyspark_magnetar.options import read_options, write_options
    from pyspark_magnetar.ranges import OffsetRange, read_range
    from pyspark_magnetar.writers import write_task

    full = f"persistent://public/default/{topic}"
    opts = read_options({"service_url": url, "topic": full}, streaming=False)

    def read(i: int) -> None:
        got = sum(b.num_rows for b in read_range(OffsetRange(TopicPartition(full, -1), 0, rows), opts))
        assert got == rows, f"read {got} of {rows}"

    values = pa.array([(str(i).encode() + b"x" * size)[:size] for i in range(rows)], pa.binary())
    keys = pa.array([f"k{i % 100}" for i in range(rows)], pa.string())
    batches = pa.Table.from_arrays([keys, values], names=["key", "value"]).to_batches(max_chunksize=10_000)

    def write(i: int) -> None:
        write_task(iter(batches), write_options({"service_url": url, "topic": f"{full}-alone-{i}"}),
                   lambda: f"bench-alone-{topic}-{i}")

    results = [timed("read_range alone", rows, read, repeat, cpu=True),
               timed("write_task alone", rows, write, repeat, cpu=True)]
    if admin_url is not None:
        from magnetar.admin.client import AdminClient

        admin = AdminClient(admin_url)

        def write_partitioned(i: int) -> None:
            admin.create_partitioned_topic(f"{full}-alone-parts-{i}", 4)
            report = write_task(iter(batches), write_options({"service_url": url, "topic": f"{full}-alone-parts-{i}"}),
                                lambda: f"bench-alone-parts-{topic}-{i}")
            assert sum(report.written.values()) == rows and len(report.written) == 4, report.written

        results.append(timed("write_task alone, 4 partitions", rows, write_partitioned, repeat, cpu=True))
    return results


#: The official client's producer settings per topic shape (see the module).
OFFICIAL_SHAPES = {
    "batched": dict(batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=1),
    "unbatched": dict(batching_enabled=False),
    "lz4": dict(batching_enabled=True, batching_max_messages=1000, batching_max_publish_delay_ms=1,
                compression_type="LZ4"),
}


def write_official(url: str, admin_url: str | None, topic: str, rows: int, size: int, shape: str) -> None:
    """``rows`` messages of ``size`` bytes into ``topic`` (2 partitions when
    ``admin_url`` is given) by the official client, in ``shape``: the lz4
    shape's messages have keys and two properties each."""
    import pulsar

    if admin_url is not None:
        from magnetar.admin.client import AdminClient

        AdminClient(admin_url).create_partitioned_topic(topic, 2)
    settings = dict(OFFICIAL_SHAPES[shape])
    if "compression_type" in settings:
        settings["compression_type"] = getattr(pulsar.CompressionType, settings["compression_type"])
    client = pulsar.Client(url, logger=_quiet())
    try:
        producer = client.create_producer(topic, block_if_queue_full=True, max_pending_messages=10_000, **settings)
        pad = b"x" * size
        keyed = shape == "lz4"
        for i in range(rows):
            value = (b"%d" % i + pad)[:size]
            if keyed:
                producer.send_async(value, None, partition_key=f"k{i % 100}",
                                    properties={"n": str(i), "shape": shape})
            else:
                producer.send_async(value, None)
        producer.flush()
        producer.close()
    finally:
        client.close()


def _quiet():
    import logging

    log = logging.getLogger("bench.pulsar-client")
    log.setLevel(logging.WARNING)
    return log


def run(spark, url: str, rows: int, size: int, tasks: int, tmp: Path, repeat: int,
        admin_url: str | None = None, only: str | None = None, official_topics: str | None = None) -> list[dict]:
    stamp = int(time.time())
    src, dst = f"bench-spark-{stamp}", f"bench-spark-copy-{stamp}"
    def read(topic: str = src):
        return spark.read.format("magnetar").option("service_url", url).option("topic", topic) \
            .option("minPartitions", str(tasks)).load()

    def rows_of(n: int):
        return spark.range(0, n, 1, 2).selectExpr(
            f"cast(concat(cast(id as string), repeat('x', {max(size - 10, 0)})) as binary) as value",
            "concat('k', cast(id % 100 as string)) as key")

    def write_to(df, fmt: str, **options) -> None:
        writer = df.write.format(fmt).mode("append")
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    def ceiling_read(n: int, batch_file: str | None = None) -> None:
        reader = spark.read.format("magnetar-bench-source").option("rows", str(n)).option("size", str(size)) \
            .option("tasks", str(tasks))
        if batch_file:
            reader = reader.option("batch_file", batch_file)
        reader.load().write.format("noop").mode("overwrite").save()

    def stream(source: str | None, n: int, sink_format: str, checkpoint: str, **options) -> None:
        if source is None:  # the ceiling source
            df = spark.readStream.format("magnetar-bench-source").option("rows", str(n)) \
                .option("size", str(size)).option("tasks", str(tasks)).option("maxOffsetsPerTrigger", str(n // 5)) \
                .load()
        else:
            df = spark.readStream.format("magnetar").option("service_url", url).option("topic", source) \
                .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(n // 5)) \
                .option("minPartitions", str(tasks)).load()
        writer = df.select("key", "value").writeStream.format(sink_format) \
            .option("checkpointLocation", str(tmp / checkpoint)).trigger(availableNow=True)
        for k, v in options.items():
            writer = writer.option(k, v)
        query = writer.start()
        query.awaitTermination()
        if query.exception() is not None:
            raise query.exception()

    # Warm-up, outside the timings: Python workers, the data sources' lookup,
    # and the JVM's code for each shape of job (the first run of a shape is
    # far slower than the next, whichever it is).
    from bench.spark_ceilings import register, save_connector_batch
    register(spark)
    warm, warm_topic = min(rows, 100_000), f"bench-warmup-{stamp}"
    write_to(rows_of(warm), "magnetar", service_url=url, topic=warm_topic)
    write_to(rows_of(warm), "magnetar-bench-sink")
    read(warm_topic).write.format("noop").mode("overwrite").save()
    ceiling_read(warm)
    warm_batch = str(tmp / "warm-batch.arrow")
    save_connector_batch(url, f"persistent://public/default/{warm_topic}", warm_batch)
    ceiling_read(warm, warm_batch)
    # A process's first streaming query pays seconds its later ones do not.
    stream(warm_topic, warm, "noop", "ck-warm-noop")
    stream(warm_topic, warm, "magnetar", "ck-warm-copy", service_url=url, topic=f"{warm_topic}-copy")
    stream(None, warm, "noop", "ck-warm-ceiling")
    stream(None, warm, "magnetar-bench-sink", "ck-warm-copy-ceiling")

    results: list[dict] = []
    if only in (None, "official"):
        results += official(spark, url, admin_url, rows, size, stamp, repeat, read, ceiling_read, stream, write_to,
                            rows_of, tmp, official_topics)
    if only == "official":
        return results
    data = rows_of(rows)
    results += [timed("batch write", rows, lambda i: write_to(data, "magnetar", service_url=url,
                                                               topic=src if i == 0 else f"{src}-{i}"), repeat)]
    results.append(timed("sink ceiling", rows, lambda i: write_to(data, "magnetar-bench-sink"), repeat))
    print(f"batch write / sink ceiling: {results[-2]['rows_per_s'] / results[-1]['rows_per_s']:.0%}", flush=True)
    assert read().count() == rows
    parquet = str(tmp / "parquet")
    data.write.parquet(parquet)
    results.append(timed("parquet read", rows, lambda i: spark.read.parquet(parquet).write.format("noop")
                         .mode("overwrite").save(), repeat))
    results.append(timed("batch read", rows, lambda i: read().write.format("noop").mode("overwrite").save(), repeat))
    results.append(timed("source ceiling", rows, lambda i: ceiling_read(rows), repeat))
    print(f"batch read / parquet read: {results[-2]['rows_per_s'] / results[-3]['rows_per_s']:.0%}; "
          f"/ source ceiling: {results[-2]['rows_per_s'] / results[-1]['rows_per_s']:.0%}", flush=True)
    results += connector_alone(url, src, rows, size, repeat, admin_url)
    batch_file = str(tmp / "connector-batch.arrow")
    save_connector_batch(url, f"persistent://public/default/{src}", batch_file)
    results.append(timed("real-batch ceiling", rows, lambda i: ceiling_read(rows, batch_file), repeat))

    results.append(timed("stream read", rows, lambda i: stream(src, rows, "noop", f"ck-noop-{i}"), repeat))
    results.append(timed("stream copy", rows, lambda i: stream(src, rows, "magnetar", f"ck-copy-{i}",
                                                                   service_url=url, topic=f"{dst}-{i}"), repeat))
    results.append(timed("stream ceiling", rows, lambda i: stream(None, rows, "noop", f"ck-ceiling-{i}"), repeat))
    results.append(timed("stream copy ceiling", rows, lambda i: stream(None, rows, "magnetar-bench-sink",
                                                                           f"ck-copy-ceiling-{i}"), repeat))
    print(f"stream read / stream ceiling: {results[-4]['rows_per_s'] / results[-2]['rows_per_s']:.0%}; "
          f"stream copy / stream copy ceiling: {results[-3]['rows_per_s'] / results[-1]['rows_per_s']:.0%}",
          flush=True)
    for i in range(repeat):
        copied = spark.read.format("magnetar").option("service_url", url).option("topic", f"{dst}-{i}").load().count()
        assert copied == rows, f"copy {i}: copied {copied} of {rows}"
    return results


def write_only(spark, brokers: list[tuple[str, str, int | None]], rows: int, size: int, repeat: int, write_to,
               rows_of, cold: bool = False) -> list[dict]:
    """``--only write``: the batch write into each of ``brokers`` (``(name,
    url, pid)``: this tree's, and a ``--peer`` checkout's), interleaved run
    by run (the order alternating), beside the sink ceiling timed between
    them; each broker's median user and system CPU seconds per write."""
    stamp = int(time.time())
    data = rows_of(rows)
    for name, url, _ in brokers:  # the JVM's and the broker's first write, untimed
        write_to(rows_of(min(rows, 100_000)), "magnetar", service_url=url, topic=f"bench-write-warm-{stamp}")
    write_to(rows_of(min(rows, 100_000)), "magnetar-bench-sink")
    runs: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name, _, _ in brokers}
    sink: list[float] = []
    if cold:
        print("--cold: page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches; sleep 5) before each timed run",
              flush=True)
    for i in range(repeat):
        for name, url, pid in (brokers if i % 2 == 0 else brokers[::-1]):
            if cold:
                drop_caches()
            user, system = cpu_split(pid)
            pages = pages_allocated()
            began = time.perf_counter()
            write_to(data, "magnetar", service_url=url, topic=f"bench-write-{stamp}-{i}")
            took = time.perf_counter() - began
            user2, system2 = cpu_split(pid)
            runs[name].append((took, user2 - user, system2 - system, pages_allocated() - pages))
        if cold:
            drop_caches()
        began = time.perf_counter()
        write_to(data, "magnetar-bench-sink")
        sink.append(time.perf_counter() - began)
    ceiling = rows / statistics.median(sink)
    print(f"{'sink ceiling':28s} {ceiling:>11,.0f} rows/s  (runs: {', '.join(f'{x:.2f}' for x in sink)} s)",
          flush=True)
    results = [{"workload": "sink ceiling", "rows": rows, "rows_per_s": round(ceiling),
                "runs_s": [round(x, 2) for x in sink]}]
    for name, measured in runs.items():
        took = statistics.median(m[0] for m in measured)
        user = statistics.median(m[1] for m in measured)
        system = statistics.median(m[2] for m in measured)
        pages = statistics.median(m[3] for m in measured)
        print(f"{'batch write, ' + name:28s} {rows / took:>11,.0f} rows/s  {rows / took / ceiling:4.0%} of the sink "
              f"ceiling  (runs: {', '.join(f'{m[0]:.2f}' for m in measured)} s; broker CPU user {user:.2f} s, "
              f"system {system:.2f} s; pages allocated {pages / 1000:,.0f}k (machine); medians; "
              f"system per run {', '.join(f'{m[2]:.2f}' for m in measured)})", flush=True)
        results.append({"workload": f"batch write, {name}", "rows": rows, "rows_per_s": round(rows / took),
                        "share": round(rows / took / ceiling, 3), "runs_s": [round(m[0], 2) for m in measured],
                        "broker_user_s": round(user, 2), "broker_system_s": round(system, 2),
                        "pages_allocated": pages, "cold": cold})
    return results


def official_topic_names(name: str | int) -> dict[str, str]:
    return {shape: f"persistent://public/default/bench-official-{shape}-{name}" for shape in OFFICIAL_SHAPES}


def write_official_topics(url: str, admin_url: str | None, rows: int, size: int, name: str | int) -> dict[str, str]:
    """The official client's topics of the bench, written (untimed)."""
    topics = official_topic_names(name)
    for shape, topic in topics.items():
        began = time.perf_counter()
        write_official(url, admin_url, topic, rows, size, shape)
        print(f"wrote {rows:,} rows with the official client, {shape}, in {time.perf_counter() - began:.1f} s",
              flush=True)
    return topics


def official(spark, url: str, admin_url: str | None, rows: int, size: int, stamp: int, repeat: int, read,
             ceiling_read, stream, write_to, rows_of, tmp: Path, written: str | None = None) -> list[dict]:
    """The topics the official client wrote, read and copied beside Spark's
    own ceilings in the same run (see the module), and a batch write beside
    the sink ceiling. ``written``: the name of topics an earlier
    ``--write-official`` run wrote to this broker (else they are written now)."""
    if written is not None:
        topics = official_topic_names(written)
    else:
        topics = write_official_topics(url, admin_url, rows, size, stamp)
    from bench.spark_ceilings import save_connector_batch
    from pyspark_magnetar.ranges import CHUNK_ROWS

    results = []
    for shape, topic in topics.items():
        df = read(topic)
        assert df.count() == rows
        # The same rows' ceiling: the shape's first record batch as the connector yields it
        # (its topic and producer names, keys, properties, batch size), saved untimed.
        batch_file = str(tmp / f"rows-{shape}.arrow")
        try:
            save_connector_batch(url, f"{topic}-partition-0", batch_file, span=4 * CHUNK_ROWS)
        except Exception:  # not partitioned (written without --admin-url)
            save_connector_batch(url, topic, batch_file, span=4 * CHUNK_ROWS)
        ceiling_read(rows, batch_file)  # each worker loads it once, untimed
        results += interleaved(f"official {shape} read", rows,
                               lambda i, df=df: df.write.format("noop").mode("overwrite").save(),
                               [("source ceiling", lambda i: ceiling_read(rows)),
                                (f"{shape} rows ceiling", lambda i, f=batch_file: ceiling_read(rows, f))], repeat)
    copy, copy_ceiling = interleaved(
        "official unbatched stream copy", rows,
        lambda i: stream(topics["unbatched"], rows, "magnetar", f"ck-official-copy-{i}", service_url=url,
                         topic=f"{topics['unbatched']}-copy-{stamp}-{i}"),
        [("stream copy ceiling", lambda i: stream(None, rows, "magnetar-bench-sink", f"ck-official-copy-ceiling-{i}"))],
        repeat)
    for i in range(repeat):
        copied = read(f"{topics['unbatched']}-copy-{stamp}-{i}").count()
        assert copied == rows, f"copy {i}: copied {copied} of {rows}"
    data = rows_of(rows)
    write, sink = interleaved(
        "batch write", rows,
        lambda i: write_to(data, "magnetar", service_url=url, topic=f"bench-official-write-{stamp}-{i}"),
        [("sink ceiling", lambda i: write_to(data, "magnetar-bench-sink"))], repeat)
    shares = "; ".join(f"{r['workload']} " + ", ".join(f"{v:.0%} of the {k}" for k, v in r["shares"].items())
                       for r in results + [copy, write] if "shares" in r)
    print(f"shares (medians over rounds): {shares}", flush=True)
    return results + [copy, copy_ceiling, write, sink]


def main() -> None:
    global BROKER_PID
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=2, help="read tasks (minPartitions)")
    parser.add_argument("--size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--url", default=None, help="use a running broker (dedup on) instead of starting one")
    parser.add_argument("--admin-url", default=None, help="that broker's admin URL (for the partitioned write)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each workload; the median is reported")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument("--only", choices=["official", "own", "write"], default=None,
                        help="only the official client's topics, only the connector's own topic, or only the "
                             "batch write beside the sink ceiling (with --peer: on both brokers, interleaved)")
    parser.add_argument("--peer", metavar="ROOT", default=None,
                        help="with --only write: also a broker running the checkout at ROOT (its .venv), same "
                             "settings, its writes interleaved with this tree's (ROOT may be this tree, with "
                             "--peer-config)")
    parser.add_argument("--peer-config", metavar="TOML", default="",
                        help="added to the peer broker's config file, e.g. '[storage] journal_direct_bytes = 0' "
                             "(a newline goes before each [section])")
    parser.add_argument("--cold", action="store_true",
                        help="with --only write, as root: drop the page cache (and wait 5 s) before each timed run")
    parser.add_argument("--write-official", metavar="NAME", default=None,
                        help="only write the official client's topics (named by NAME) to --url, then exit")
    parser.add_argument("--official-topics", metavar="NAME", default=None,
                        help="read the official topics an earlier --write-official NAME wrote to --url")
    parser.add_argument("--broker-pid", type=int, default=None,
                        help="the --url broker's pid, for its CPU per workload")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable), e.g. spark.buffer.size=1m")
    args = parser.parse_args()
    conf = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--conf takes KEY=VALUE, got {item!r}")
        conf[key] = value
    if (args.write_official or args.official_topics) and args.url is None:
        parser.error("--write-official and --official-topics need --url (a broker that keeps the topics)")
    if args.cold and (args.only != "write" or os.geteuid() != 0):
        parser.error("--cold goes with --only write, run as root (it writes /proc/sys/vm/drop_caches)")
    if args.write_official:
        write_official_topics(args.url, args.admin_url, args.rows, args.size, args.write_official)
        return
    BROKER_PID = args.broker_pid
    tmp = Path(tempfile.mkdtemp(prefix="magnetar-spark-bench-"))
    broker = None
    url, admin_url = args.url, args.admin_url
    if url is None:
        config = tmp / "magnetar.toml"
        config.write_text("deduplication_enabled = true\n")
        broker = standalone_broker(tmp / "data", ["--config", str(config), "--log-level", "WARNING"]).start()
        url, admin_url = broker.service_url, broker.admin_url
        BROKER_PID = broker.proc.pid
    peer = None
    if args.peer is not None:
        if args.only != "write" or args.url is not None:
            parser.error("--peer goes with --only write and a broker the bench starts")
        root = Path(args.peer).resolve()
        peer_config = tmp / "peer.toml"
        peer_config.write_text("deduplication_enabled = true\n" + args.peer_config.replace("[", "\n[").replace(
            "] ", "]\n") + "\n")
        peer = peer_broker(root, tmp / "peer-data", ["--config", str(peer_config), "--log-level", "WARNING"]).start()
    spark = None
    try:
        spark = session(args.master, conf)
        print(f"{args.rows:,} rows of {args.size} B, {args.master}, {args.tasks} read tasks, broker {url}, "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
              + "".join(f", {k}={v}" for k, v in conf.items()), flush=True)
        if args.only == "write":
            from bench.spark_ceilings import register

            register(spark)
            brokers = [("this tree", url, BROKER_PID)]
            if peer is not None:
                brokers.append((f"peer {Path(args.peer).resolve().name}" + (f" ({args.peer_config})" if args.peer_config
                                else ""), peer.service_url, peer.proc.pid))
            results = write_only(spark, brokers, args.rows, args.size, max(1, args.repeat), _write_to, _rows_of(spark,
                                 args.size), cold=args.cold)
        else:
            results = run(spark, url, args.rows, args.size, args.tasks, tmp, max(1, args.repeat), admin_url,
                          args.only, args.official_topics)
    finally:
        if spark is not None:
            spark.stop()
        if peer is not None:
            peer.stop()
        if broker is not None:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(results))


def _write_to(df, fmt: str, **options) -> None:
    writer = df.write.format(fmt).mode("append")
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save()


def _rows_of(spark, size: int):
    def rows_of(n: int):
        return spark.range(0, n, 1, 2).selectExpr(
            f"cast(concat(cast(id as string), repeat('x', {max(size - 10, 0)})) as binary) as value",
            "concat('k', cast(id % 100 as string)) as key")
    return rows_of


def peer_broker(root: Path, data_dir: Path, extra: list[str]):
    """A standalone broker running the checkout at ``root`` (its own .venv
    and code: ``-P`` keeps this directory off its path), not started."""
    from magnetar_harness.broker import BrokerProcess

    python = str(root / ".venv" / "bin" / "python")

    def command(port: int, admin_port: int) -> list[str]:
        return [python, "-P", "-m", "magnetar.cli", "standalone", "--data-dir", str(data_dir), "--port", str(port),
                "--admin-port", str(admin_port), "--advertised-address", "127.0.0.1", *extra]

    return BrokerProcess(command, data_dir.parent / f"{data_dir.name}-broker.log", data_dir=data_dir)


if __name__ == "__main__":
    main()
