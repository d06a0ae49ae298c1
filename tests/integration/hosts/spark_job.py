"""A Spark job for the standalone cluster of the test bed, submitted from the
client host (``spark-submit --master spark://...``): it reads a topic through
the connector, writes what it read to another topic, and prints one JSON
line: the rows read and the executors' addresses (which hosts ran them)."""
import json
import sys

from pyspark.sql import SparkSession

service_url, source, destination = sys.argv[1:4]
spark = SparkSession.builder.appName("magnetar-hosts").getOrCreate()
df = spark.read.format("magnetar").option("service_url", service_url).option("topic", source).load()
rows = df.count()
df.select("value").write.format("magnetar").option("service_url", service_url) \
    .option("topic", destination).mode("append").save()
executors = sorted({e.host() for e in spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()})
print(json.dumps({"rows": rows, "executors": executors}), flush=True)
spark.stop()
