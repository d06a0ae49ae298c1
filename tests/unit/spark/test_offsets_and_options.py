"""Offset specifications and option parsing: every way to get them wrong
fails with an OptionError that names the option."""
from __future__ import annotations

import pytest

import pyspark  # noqa: E402,F401  (a test dependency: missing must fail, not skip)

from pyspark_magnetar.errors import OptionError  # noqa: E402
from pyspark_magnetar.offsets import (EARLIEST, LATEST, TopicPartition, offsets_from_json,  # noqa: E402
                                      offsets_to_json, parse_offset_spec)
from pyspark_magnetar.options import read_options, write_options  # noqa: E402

T = "persistent://public/default/t"
BASE = {"service_url": "pulsar://localhost:6650", "topic": "t"}


def test_words_and_defaults():
    assert parse_offset_spec("startingOffsets", None, default=EARLIEST).default == EARLIEST
    assert parse_offset_spec("startingOffsets", " Latest ", default=EARLIEST).default == LATEST
    assert parse_offset_spec("startingOffsets", "earliest", default=LATEST).default == EARLIEST


def test_json_shape_expands_short_names_and_partitions():
    spec = parse_offset_spec("startingOffsets", '{"t": {"-1": 42}, "a/b/p": {"0": 7, "1": -2}}', default=LATEST)
    assert spec.for_partition(TopicPartition(T)) == 42
    assert spec.for_partition(TopicPartition("persistent://a/b/p", 0)) == 7
    assert spec.for_partition(TopicPartition("persistent://a/b/p", 1)) == EARLIEST
    assert spec.for_partition(TopicPartition("persistent://a/b/p", 2)) == LATEST  # not named: the default


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "nor valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"t": 5}', "must map to a non-empty object"),
    ('{"t": {}}', "must map to a non-empty object"),
    ('{"t": {"zero": 5}}', "is not an integer"),
    ('{"t": {"-3": 5}}', "partition -3"),
    ('{"t": {"-1": -3}}', "must be an integer >= -2"),
    ('{"t": {"-1": 1.5}}', "must be an integer >= -2"),
    ('{"t": {"-1": true}}', "must be an integer >= -2"),
    ('{"bad//name": {"-1": 0}}', "invalid topic name"),
])
def test_malformed_offsets_name_the_option(text, fragment):
    with pytest.raises(OptionError) as info:
        parse_offset_spec("startingOffsets", text, default=LATEST)
    assert "startingOffsets" in str(info.value) and fragment in str(info.value)


def test_ending_offsets_cannot_be_earliest():
    with pytest.raises(OptionError, match="cannot be 'earliest'"):
        read_options({**BASE, "endingOffsets": "earliest"}, streaming=False)
    with pytest.raises(OptionError, match="earliest"):
        read_options({**BASE, "endingOffsets": '{"t": {"-1": -2}}'}, streaming=False)


def test_stray_partitions_are_reported():
    spec = parse_offset_spec("startingOffsets", '{"other": {"-1": 1}}', default=LATEST)
    with pytest.raises(OptionError, match="does not read: persistent://public/default/other"):
        spec.check_covered_by("startingOffsets", [TopicPartition(T)])


def test_checkpoint_round_trip_is_concrete():
    offsets = {TopicPartition(T): 5, TopicPartition("persistent://a/b/p", 1): 0}
    doc = offsets_to_json(offsets)
    assert doc == {T: {"-1": 5}, "persistent://a/b/p": {"1": 0}}
    assert offsets_from_json("x", doc, concrete=True) == offsets
    with pytest.raises(OptionError):
        offsets_from_json("x", {T: {"-1": -1}}, concrete=True)


def test_read_defaults_follow_kafka():
    batch = read_options(BASE, streaming=False)
    stream = read_options(BASE, streaming=True)
    assert batch.starting.default == EARLIEST and batch.ending.default == LATEST
    assert stream.starting.default == LATEST
    assert batch.selection.topics == (T,) and batch.fail_on_data_loss is True


@pytest.mark.parametrize("opts, streaming, fragment", [
    ({"topic": "t"}, False, "'service_url' is required"),
    ({**BASE, "service_url": "http://x:1"}, False, "pulsar://host:port"),
    ({"service_url": "pulsar://h:1"}, False, "exactly one of"),
    ({**BASE, "topics": "a,b"}, False, "exactly one of"),
    ({**BASE, "endingOffsets": "latest"}, True, "batch reads only"),
    ({**BASE, "maxRecordsPerTrigger": "10"}, False, "streaming reads only"),
    ({**BASE, "maxRecordsPerTrigger": "0"}, True, "positive integer"),
    ({**BASE, "failOnDataLoss": "maybe"}, False, "true or false"),
    ({**BASE, "startingOffset": "earliest"}, False, "did you mean 'startingOffsets'"),
    ({"service_url": "pulsar://h:1", "topicsPattern": "a/b/c["}, False, "not a valid regular expression"),
    ({"service_url": "pulsar://h:1", "topics": "a,,b"}, False, "empty topic name"),
    ({**BASE, "valueFormat": "avro"}, False, "'valueFormat' must be auto"),
])
def test_bad_read_options(opts, streaming, fragment):
    with pytest.raises(OptionError) as info:
        read_options(opts, streaming=streaming)
    assert fragment in str(info.value)


def test_options_are_case_insensitive_and_spark_extras_are_ignored():
    opts = read_options({"SERVICE_URL": "pulsar://h:1", "Topics": "a, b,a", "path": "x",
                         "checkpointlocation": "/tmp/x", "queryname": "q"}, streaming=True)
    assert opts.selection.topics == ("persistent://public/default/a", "persistent://public/default/b")


def test_patterns():
    short = read_options({"service_url": "pulsar://h:1", "topicsPattern": "orders-.*"}, streaming=True)
    assert short.selection.pattern == "persistent://public/default/orders-.*"
    assert short.selection.namespace == "public/default"
    full = read_options({"service_url": "pulsar://h:1", "topicsPattern": "persistent://t1/ns/x.*"}, streaming=True)
    assert full.selection.namespace == "t1/ns"


def test_write_options():
    assert write_options({"service_url": "pulsar://h:1"}).topic is None
    assert write_options({"service_url": "pulsar://h:1", "topic": "o"}).topic == "persistent://public/default/o"
    with pytest.raises(OptionError, match="is for reads"):
        write_options({"service_url": "pulsar://h:1", "topics": "a,b"})
    with pytest.raises(OptionError, match="must be >= 'batchingMaxMessages'"):
        write_options({"service_url": "pulsar://h:1", "maxPendingMessages": "10"})


def test_hashing_scheme_option():
    from magnetar.client.partition_routing import HashingScheme

    assert write_options({"service_url": "pulsar://h:1"}).hashing_scheme == HashingScheme.JavaStringHash
    assert write_options({"service_url": "pulsar://h:1", "hashingScheme": "murmur3_32hash"}).hashing_scheme == \
        HashingScheme.Murmur3_32Hash
    with pytest.raises(OptionError, match="BoostHash depends on its standard library"):
        write_options({"service_url": "pulsar://h:1", "hashingScheme": "BoostHash"})
    with pytest.raises(OptionError, match="must be JavaStringHash .the default. or Murmur3_32Hash, got 'crc'"):
        write_options({"service_url": "pulsar://h:1", "hashingScheme": "crc"})
