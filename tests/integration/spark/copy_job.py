"""A streaming copy run as its own Spark driver process, for the kill and
restart test (test_kill_restart.py): topic ``src`` -> exactly-once sink ->
topic ``dst``, Trigger.AvailableNow, small micro-batches, and a Python UDF
that takes about a millisecond per row so that a kill lands inside a batch.

    python copy_job.py SERVICE_URL SRC DST CHECKPOINT
"""
from __future__ import annotations

import sys
import time


def main() -> None:
    url, src, dst, checkpoint = sys.argv[1:5]
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    spark = (SparkSession.builder.master("local[2]").appName("magnetar-copy-job")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")

    def slow(value):  # no type hints: they would make Spark look for an Arrow UDF
        time.sleep(0.001)
        return value

    slow_udf = udf(slow, "binary", useArrow=False)
    df = spark.readStream.format("magnetar").option("service_url", url).option("topic", src) \
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "600").load()
    query = df.select(slow_udf("value").alias("value"), "key").writeStream.format("magnetar") \
        .option("service_url", url).option("topic", dst).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"copy failed: {query.exception()}")
    print("copy complete", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
