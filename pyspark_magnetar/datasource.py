"""The ``magnetar`` data source: Spark's entry point into the connector.

Spark creates it on the driver for every read and write with the user's
options; each method validates the options for its direction and returns
a reader or writer that holds nothing but options (they are pickled to
executors). See docs/spark.md for the options and guarantees.
"""
from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader, DataSourceStreamWriter,
                                    DataSourceWriter)
from pyspark.sql.types import StructType

from .batch_reader import MagnetarBatchReader
from .errors import OptionError
from .options import ReadOptions, WriteOptions, read_options, write_options
from .records import check_write_schema
from .schema import READ_SCHEMA
from .session import BrokerSession
from .stream_reader import MagnetarStreamReader
from .topic_schemas import TopicSchema, common_schema, fetch_schema
from .topics import resolve_partitions
from .value_columns import ValueSpec, check_value_struct
from .writers import MagnetarBatchWriter, MagnetarStreamWriter


class MagnetarDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("magnetar")``."""

    @classmethod
    def name(cls) -> str:
        return "magnetar"

    def schema(self) -> StructType:
        """The fixed columns of :mod:`.schema`, or with ``value`` as a struct
        when the topics read have a JSON or Avro schema (:mod:`.value_columns`)."""
        try:
            opts = read_options(self.options, streaming=None)
        except OptionError:
            return READ_SCHEMA  # not a valid read (or a write): reader() or writer() says why
        spec = self._value_spec(opts)
        return READ_SCHEMA if spec is None else spec.read_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = read_options(self.options, streaming=False)
        return MagnetarBatchReader(_with_value(opts, self._value_spec(opts), schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = read_options(self.options, streaming=True)
        return MagnetarStreamReader(_with_value(opts, self._value_spec(opts), schema))

    def _value_spec(self, opts: ReadOptions) -> ValueSpec | None:
        """The value struct's schema for ``opts`` (None: bytes), asked once per data source."""
        if opts.value_format == "binary":
            return None
        if not hasattr(self, "_spec"):
            with BrokerSession(opts.service_url, opts.operation_timeout_s) as session:
                found = session.run(_common_schema(session.client, opts))
            self._spec = None if found is None else ValueSpec.of(found)
        return self._spec

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("Magnetar topics are append-only: use mode('append'), not 'overwrite'")
        return MagnetarBatchWriter(_checked_write_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        # ``overwrite`` is Spark's complete output mode: every batch appends the whole result,
        # as with Kafka.
        return MagnetarStreamWriter(_checked_write_options(self.options, schema))


def _checked_write_options(options, schema: StructType) -> WriteOptions:
    """Write options, checked against the schema and, for a struct ``value``,
    against the topic's schema on the broker (fetched once, here)."""
    opts = write_options(options)
    check_write_schema(schema, opts.topic)
    value = schema["value"].dataType
    if opts.topic is not None and isinstance(value, StructType):
        with BrokerSession(opts.service_url, opts.operation_timeout_s) as session:
            found = session.run(fetch_schema(session.client, opts.topic))
        spec = ValueSpec.of(found) if found is not None and found.structured else None
        check_value_struct(opts.topic, spec, value)
        opts = replace(opts, value=spec)
    return opts


async def _common_schema(client, opts: ReadOptions) -> TopicSchema | None:
    return await common_schema(client, await resolve_partitions(client, opts.selection))


def _with_value(opts: ReadOptions, spec: ValueSpec | None, schema: StructType) -> ReadOptions:
    """``opts`` carrying ``spec``, once ``schema`` (Spark's, maybe the user's) is the one it implies."""
    expected = READ_SCHEMA if spec is None else spec.read_schema()
    if schema != expected:
        raise OptionError("the magnetar source's schema follows the topic (see docs/spark.md, Rows); do not pass "
                          f".schema(...): {expected.simpleString()}")
    return replace(opts, value=spec)
