import pytest

from magnetar.broker.topic_name import InvalidTopicName, parse


@pytest.mark.parametrize(
    "raw,full",
    [
        ("my-topic", "persistent://public/default/my-topic"),
        ("t/ns/x", "persistent://t/ns/x"),
        ("persistent://t/ns/x-partition-3", "persistent://t/ns/x-partition-3"),
    ],
)
def test_short_and_full_names(raw, full):
    assert str(parse(raw)) == full


def test_partition_suffix():
    name = parse("persistent://t/ns/x-partition-3")
    assert name.partition_index == 3
    assert str(name.partitioned_base) == "persistent://t/ns/x"
    assert parse("x").partition_index == -1


@pytest.mark.parametrize("raw", ["", "a/b", "bad://t/n/x", "persistent://t/n/x/y", "persistent://t/n/x y"])
def test_invalid_names(raw):
    with pytest.raises(InvalidTopicName):
        parse(raw)
