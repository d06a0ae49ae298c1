import pytest

from magnetar.client import errors
from magnetar.client.topic import full_topic_name, partition_index, partition_name
from magnetar.protocol import ServerError


@pytest.mark.parametrize("code, kind", [
    (ServerError.ProducerBusy, errors.ProducerBusy),
    (ServerError.ProducerFenced, errors.ProducerFenced),
    (ServerError.TopicNotFound, errors.TopicNotFound),
    (ServerError.ServiceNotReady, errors.ServiceUnitNotReady),
    (ServerError.ExpectedOffsetMismatch, errors.ExpectedOffsetMismatch),
    (12345, errors.UnknownError),
])
def test_server_errors_map_to_exceptions_with_code(code, kind):
    exc = errors.from_server_error(code, "boom")
    assert type(exc) is kind and isinstance(exc, errors.PulsarError)
    assert exc.code == code and "boom" in str(exc)


def test_fatal_classification():
    assert errors.is_fatal(errors.ProducerBusy(), reconnecting=False)
    assert not errors.is_fatal(errors.ProducerBusy(), reconnecting=True)
    assert errors.is_fatal(errors.ProducerFenced(), reconnecting=True)
    for retryable in (errors.ServiceUnitNotReady(), errors.ConnectError(), errors.Timeout()):
        assert not errors.is_fatal(retryable, reconnecting=False)
        assert not errors.is_fatal(retryable, reconnecting=True)


def test_expected_offset_mismatch_carries_next_offset():
    exc = errors.ExpectedOffsetMismatch("no", ServerError.ExpectedOffsetMismatch, next_offset=42)
    assert exc.next_offset == 42 and exc.result is errors.Result.ExpectedOffsetMismatch


def test_results_match_official_numbering():
    import pulsar  # noqa: E402
    for name, member in errors.Result.__members__.items():
        if hasattr(pulsar.Result, name):
            assert int(getattr(pulsar.Result, name)) == int(member), name


@pytest.mark.parametrize("short, full", [
    ("t", "persistent://public/default/t"),
    ("ten/ns/t", "persistent://ten/ns/t"),
    ("non-persistent://a/b/c", "non-persistent://a/b/c"),
])
def test_topic_names(short, full):
    assert full_topic_name(short) == full


@pytest.mark.parametrize("bad", ["", "a/b", "http://a/b/c", " t", "persistent://a/b"])
def test_bad_topic_names(bad):
    with pytest.raises(errors.InvalidTopicName):
        full_topic_name(bad)


def test_partition_names():
    name = partition_name("persistent://a/b/c", 3)
    assert name == "persistent://a/b/c-partition-3"
    assert partition_index(name) == 3 and partition_index("persistent://a/b/c") == -1
