"""The ``magnetar`` data source: Spark's entry point into the connector.

Spark creates it on the driver for every read and write with the user's
options; each method validates the options for its direction and returns
a reader or writer that holds nothing but options (they are pickled to
executors). See docs/spark.md for the options and guarantees.
"""
from __future__ import annotations

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter)
from pyspark.sql.types import StructType

from .batch_reader import MagnetarBatchReader
from .errors import OptionError
from .options import WriteOptions, read_options, write_options
from .records import check_write_schema
from .schema import READ_SCHEMA
from .session import BrokerSession
from .stream_reader import MagnetarStreamReader
from .topics import check_writable
from .writers import MagnetarBatchWriter, MagnetarStreamWriter


class MagnetarDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("magnetar")``."""

    @classmethod
    def name(cls) -> str:
        return "magnetar"

    def schema(self) -> StructType:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_read_schema(schema)
        return MagnetarBatchReader(read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_read_schema(schema)
        return MagnetarStreamReader(read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("Magnetar topics are append-only: use mode('append'), not 'overwrite'")
        return MagnetarBatchWriter(_checked_write_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # ``overwrite`` is Spark's complete output mode: every batch appends the whole result,
        # as with Kafka.
        return MagnetarStreamWriter(_checked_write_options(self.options, schema))


def _checked_write_options(options, schema: StructType) -> WriteOptions:
    """Write options, checked against the schema and, for a ``topic`` option,
    against the broker (a partitioned destination fails here, not in every task)."""
    opts = write_options(options)
    check_write_schema(schema, opts.topic)
    if opts.topic is not None:
        with BrokerSession(opts.service_url, opts.operation_timeout_s) as session:
            session.run(check_writable(session.client, opts.topic))
    return opts


def _check_read_schema(schema: StructType) -> None:
    if schema != READ_SCHEMA:
        raise OptionError("the magnetar source has a fixed schema; do not pass .schema(...): "
                          f"{READ_SCHEMA.simpleString()}")
