import pytest
from hypothesis import given, strategies as st

from magnetar.client import MessageId
from magnetar.protocol import pb

ids = st.builds(
    MessageId,
    st.integers(-1, 2**63 - 1), st.integers(-1, 2**63 - 1), st.integers(-1, 10_000), st.integers(-1, 1000),
)


def test_order_is_ledger_entry_batch():
    assert MessageId(1, 5) < MessageId(1, 6) < MessageId(2, 0)
    assert MessageId(1, 5, -1) < MessageId(1, 5, 0) < MessageId(1, 5, 1) < MessageId(1, 6, -1)
    assert MessageId.earliest < MessageId(0, 0) < MessageId.latest
    assert sorted([MessageId(3, 1), MessageId(1, 2, 3), MessageId(1, 2)]) == [
        MessageId(1, 2), MessageId(1, 2, 3), MessageId(3, 1)]


def test_equality_ignores_batch_size_and_hash_agrees():
    a, b = MessageId(1, 2, 3, -1, batch_size=10), MessageId(1, 2, 3, -1)
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1


def test_sentinels_match_the_official_client():
    assert (MessageId.earliest.ledger_id(), MessageId.earliest.entry_id()) == (-1, -1)
    assert MessageId.latest.ledger_id() == MessageId.latest.entry_id() == 2**63 - 1
    wire = MessageId.earliest.to_proto()
    assert wire.ledgerId == wire.entryId == 2**64 - 1


@given(ids)
def test_serialize_round_trip(mid):
    back = MessageId.deserialize(mid.serialize())
    assert back == mid
    assert (back.ledger_id(), back.entry_id(), back.batch_index(), back.partition()) == (
        mid.ledger_id(), mid.entry_id(), mid.batch_index(), mid.partition())


def test_serialization_is_the_official_format():
    import pulsar  # noqa: E402
    theirs = pulsar.MessageId(partition=1, ledger_id=2, entry_id=3, batch_index=4)
    assert MessageId(2, 3, 4, 1).serialize() == theirs.serialize()
    ours = MessageId.deserialize(theirs.serialize())
    assert ours == MessageId(ledger_id=2, entry_id=3, batch_index=4, partition=1)


@pytest.mark.parametrize("garbage", [b"\xff\xff", b"\x08\x01"])
def test_deserialize_rejects_garbage(garbage):
    with pytest.raises(ValueError):
        MessageId.deserialize(garbage)


def test_from_proto_turns_sentinels_signed():
    mid = MessageId.from_proto(pb.MessageIdData(ledgerId=7, entryId=2**64 - 1))
    assert mid.entry_id() == -1 and mid.ledger_id() == 7


def test_entry_drops_batch_index():
    mid = MessageId(4, 5, 6, 2, batch_size=8)
    assert mid.in_batch()
    assert mid.entry() == MessageId(4, 5, -1, 2)
    assert not MessageId(4, 5, 0, -1, batch_size=1).in_batch()
