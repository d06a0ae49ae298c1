"""Streaming pipeline: payments -> per-user totals per 10-second window -> payment-totals.

    .venv/bin/python examples/spark/pipeline.py [--once] [--checkpoint DIR]

Reads the ``payments`` topic as a stream, parses the JSON values, counts and
sums amounts per user and 10-second event-time window, and publishes each
window's final total as JSON, keyed by user, to ``payment-totals``. Output
mode is append: a window is published once, when the watermark (the latest
event time seen minus 30 s of allowed lateness) has passed its end, so the
newest windows wait for newer events. (Python data source sinks support
append and complete modes, not update.)

Without --once it runs until Ctrl-C, one micro-batch every 5 seconds; --once
processes what is there now (Trigger.AvailableNow) and stops. Restart it with
the same --checkpoint and it continues where it stopped: no event counted
twice, no total published twice.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import EVENTS, REPO, SERVICE_URL, TOTALS, spark_session  # noqa: E402


def build(spark):
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("magnetar")
        .option("service_url", SERVICE_URL)
        .option("topic", EVENTS)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "20000")  # bound each micro-batch
        .load()
    )
    parsed = events.select(
        F.from_json(F.col("value").cast("string"), "user string, amount double").alias("e"),
        # Producers set the event time; fall back to the publish time when they did not.
        F.coalesce("event_time", "publish_time").alias("ts"),
    ).select("e.user", "e.amount", "ts")
    totals = (
        parsed.withWatermark("ts", "30 seconds")
        .groupBy("user", F.window("ts", "10 seconds"))
        .agg(F.count("*").alias("events"), F.round(F.sum("amount"), 2).alias("total"))
    )
    return totals.select(
        F.col("user").alias("key"),
        F.to_json(F.struct("user", F.col("window.start").alias("window_start"), "events", "total"))
        .cast("binary").alias("value"),
        F.col("window.start").alias("event_time"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--once", action="store_true", help="process what is there now, then stop")
    parser.add_argument("--checkpoint", default=str(REPO / "data" / "spark-checkpoints" / TOTALS))
    args = parser.parse_args()
    spark = spark_session("magnetar-payments-pipeline")
    writer = (
        build(spark).writeStream.format("magnetar")
        .option("service_url", SERVICE_URL)
        .option("topic", TOTALS)
        .option("checkpointLocation", args.checkpoint)
        .outputMode("append")
    )
    writer = writer.trigger(availableNow=True) if args.once else writer.trigger(processingTime="5 seconds")
    query = writer.start()
    print(f"running {query.id}; checkpoint {args.checkpoint}")
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    progress = query.recentProgress
    print(f"{len(progress)} micro-batches, {sum(p['numInputRows'] for p in progress)} events read")
    spark.stop()


if __name__ == "__main__":
    main()
