"""What the example scripts share: the broker URL, topic names, a SparkSession."""
from __future__ import annotations

import os
import sys
from pathlib import Path

SERVICE_URL = os.environ.get("MAGNETAR_URL", "pulsar://localhost:6650")
EVENTS = "payments"
TOTALS = "payment-totals"
REPO = Path(__file__).resolve().parents[2]


def spark_session(app: str):
    # Python workers must run this interpreter. Spark finds pyspark_magnetar by
    # scanning the workers' sys.path for pyspark_* modules; an editable install
    # (make install) hides it behind an import hook, so put the repo on the path.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]")).appName(app)
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark
