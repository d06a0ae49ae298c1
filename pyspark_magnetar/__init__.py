"""PySpark connector for Magnetar: topics as batch and streaming sources and sinks.

    df = spark.read.format("magnetar").option("service_url", "pulsar://localhost:6650") \
        .option("topic", "orders").load()

Spark 4 finds this package by itself: it imports every top-level module
whose name starts with ``pyspark_`` and registers its ``DefaultSource``
under ``DefaultSource.name()`` ("magnetar"). If the package is not on the
Python workers' ``sys.path`` as a plain directory (an editable install
uses an import hook that this lookup does not see), register it once:
``spark.dataSource.register(pyspark_magnetar.DefaultSource)``.

Modules: :mod:`.datasource` (the entry point), :mod:`.options`,
:mod:`.offsets`, :mod:`.schema`, :mod:`.topics` and :mod:`.scan` (reading),
:mod:`.ranges`, :mod:`.batch_reader`, :mod:`.stream_reader`,
:mod:`.admission`, :mod:`.records`, :mod:`.identity`, :mod:`.sink` and
:mod:`.writers` (writing), :mod:`.session` (the client on a loop thread),
:mod:`.errors`. Guarantees and options: docs/spark.md.
"""
from .datasource import MagnetarDataSource
from .errors import DataLossError, MagnetarSparkError, OptionError, SinkError, TopicNotFoundError

DefaultSource = MagnetarDataSource

__all__ = ["DefaultSource", "MagnetarDataSource", "MagnetarSparkError", "OptionError", "TopicNotFoundError",
           "DataLossError", "SinkError"]
