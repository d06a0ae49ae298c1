from magnetar.client.acks import BatchAckTracker, Deadlines, PendingAcks
from magnetar.client.consumer import _passes, has_more_after
from magnetar.client.message_id import MessageId


def member(entry, index, size=4, ledger=1):
    return MessageId(ledger, entry, index, -1, size)


def test_single_messages_ack_at_once():
    t = BatchAckTracker()
    assert t.ack(MessageId(1, 1))
    assert len(t) == 0


def test_batch_entry_acked_when_all_members_are():
    t = BatchAckTracker()
    assert not t.ack(member(5, 2))
    assert not t.ack(member(5, 0))
    assert not t.ack(member(5, 2))  # a repeat changes nothing
    assert t.is_acked(member(5, 0)) and not t.is_acked(member(5, 1))
    assert not t.ack(member(5, 3))
    assert t.ack(member(5, 1))
    assert len(t) == 0


def test_cumulative_within_a_batch_acks_the_previous_entry():
    t = BatchAckTracker()
    t.ack(member(3, 0))
    assert t.ack_cumulative(member(5, 1)) == MessageId(1, 4)
    assert len(t) == 1  # entry 3 forgotten, entry 5 partially acked
    assert t.is_acked(member(5, 1)) and t.is_acked(member(4, 3)) and not t.is_acked(member(5, 2))
    assert t.ack_cumulative(member(5, 3)) == MessageId(1, 5)
    assert len(t) == 0


def test_cumulative_completing_a_batch_by_individual_acks():
    t = BatchAckTracker()
    t.ack(member(7, 3))
    t.ack(member(7, 2))
    assert t.ack_cumulative(member(7, 1)) == MessageId(1, 7)


def test_cumulative_in_first_entry_of_a_ledger_waits():
    t = BatchAckTracker()
    assert t.ack_cumulative(member(0, 0)) is None
    assert t.ack_cumulative(MessageId(1, 0)) == MessageId(1, 0)


def test_clear_forgets_cumulative_floor():
    t = BatchAckTracker()
    t.ack_cumulative(MessageId(1, 9))
    assert t.is_acked(MessageId(1, 3))
    t.clear()
    assert not t.is_acked(MessageId(1, 3))


def test_pending_acks_group_and_take():
    p = PendingAcks()
    p.add(MessageId(1, 1))
    p.add(MessageId(1, 1))
    p.add(MessageId(1, 2))
    p.add_cumulative(MessageId(1, 5))
    p.add_cumulative(MessageId(1, 4))
    assert len(p) == 3
    assert p.take() == ([MessageId(1, 1), MessageId(1, 2)], MessageId(1, 5))
    assert len(p) == 0 and p.take() == ([], None)


def test_deadlines():
    d = Deadlines()
    d.add(MessageId(1, 1), 5.0)
    d.add(MessageId(1, 2), 3.0)
    d.add(MessageId(1, 2), 9.0)  # the first deadline stands
    assert d.earliest() == 3.0
    assert d.pop_due(4.0) == [MessageId(1, 2)]
    d.remove(MessageId(1, 1))
    assert len(d) == 0 and d.earliest() is None


def test_reader_start_filter():
    start = MessageId(1, 5)
    assert not _passes(MessageId(1, 5), start, inclusive=False)
    assert _passes(MessageId(1, 5), start, inclusive=True)
    assert not _passes(member(5, 3), start, inclusive=False)  # the whole entry is behind an exclusive start
    assert _passes(MessageId(1, 6), start, inclusive=False)
    assert not _passes(MessageId(1, 4), start, inclusive=True)
    batch_start = member(5, 1)
    assert [i for i in range(4) if _passes(member(5, i), batch_start, False)] == [2, 3]
    assert [i for i in range(4) if _passes(member(5, i), batch_start, True)] == [1, 2, 3]


def test_has_more_after():
    assert has_more_after(MessageId(1, 6), MessageId(1, 5), False)
    assert not has_more_after(MessageId(1, 5), MessageId(1, 5), False)
    assert has_more_after(MessageId(1, 5), MessageId(1, 5), True)
    assert has_more_after(member(5, 3), member(5, 2), False)
    assert not has_more_after(member(5, 3), member(5, 3), False)
    # the broker names only the entry: more members remain unless ref is the last
    assert has_more_after(MessageId(1, 5), member(5, 2), False)
    assert not has_more_after(MessageId(1, 5), member(5, 3), False)
