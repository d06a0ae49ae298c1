"""Print the totals per user and window from ``payment-totals`` (a batch read).

    .venv/bin/python examples/spark/show_totals.py [--limit 20]

The pipeline publishes each window's total once. Should a total appear
twice (a sink without deduplication, after a retry), the latest one per
(user, window), by offset, wins; the count of duplicates is printed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import SERVICE_URL, TOTALS, spark_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=20)
    args = parser.parse_args()
    spark = spark_session("magnetar-payments-totals")
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = spark.read.format("magnetar").option("service_url", SERVICE_URL).option("topic", TOTALS).load()
    totals = rows.select("offset", F.from_json(F.col("value").cast("string"),
                                               "user string, window_start timestamp, events long, total double")
                         .alias("t")).select("offset", "t.*")
    latest = totals.withColumn("n", F.row_number().over(
        Window.partitionBy("user", "window_start").orderBy(F.desc("offset")))).where("n = 1").drop("n", "offset")
    published = rows.count()
    distinct = latest.count()
    print(f"{published} totals published for {distinct} (user, window) pairs "
          f"({published - distinct} duplicates); newest first:")
    latest.orderBy(F.desc("window_start"), "user").show(args.limit, truncate=False)
    spark.stop()


if __name__ == "__main__":
    main()
