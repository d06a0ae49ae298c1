"""The raw generator's window: one record per write, settled by runs of
receipts (``_Producer.on_receipts``) with the same counts and latency
samples as one receipt at a time, and refused when a receipt is not for
the head of the window."""
from __future__ import annotations

import queue

import pytest

from magnetar.perf.raw_driver import _Producer
from magnetar.perf.reporting import Reporter
from magnetar.protocol import ProtocolError

MS = 1_000_000  # ns


def producer() -> _Producer:
    return _Producer(0, "t", Reporter(queue.Queue(), 0, "producer"), size=100)


def settled(p: _Producer) -> tuple[int, int, list[int]]:
    """(messages counted, errors, latency samples in ms) so far."""
    r = p.reporter
    hist = r._hist
    samples = []
    for item in hist.get_recorded_iterator():
        samples += [round(item.value_iterated_to / 1000)] * item.count_added_in_this_iter_step
    return r._msgs, r._errors, samples


def test_a_run_settles_bursts_of_plain_entries_across_records():
    p = producer()
    p.window.extend([(0, 3, 1, 0), (3, 2, 1, 5 * MS)])  # two writes: entries 0-2, then 3-4
    p.pending = 5
    p.on_receipts(0, 4, 10 * MS)  # 0..3: the first write and half the second
    assert list(p.window) == [(4, 1, 1, 5 * MS)]
    assert p.pending == 1
    msgs, errors, samples = settled(p)
    assert (msgs, errors) == (4, 0)
    assert samples == [5, 10, 10, 10]
    p.on_receipts(4, 1, 12 * MS)
    assert not p.window and p.pending == 0 and settled(p)[0] == 5


def test_batched_entries_are_settled_one_receipt_each():
    p = producer()
    p.window.extend([(0, 1, 100, 0), (100, 1, 100, 0)])  # two entries of 100 messages
    p.pending = 200
    p.on_receipts(0, 1, MS)
    p.on_receipts(100, 1, MS)
    assert settled(p)[0] == 200 and p.pending == 0
    p.window.append((200, 1, 100, 0))
    with pytest.raises(ProtocolError):
        p.on_receipts(200, 2, MS)  # a run of two ids cannot cover a 100-message entry and go on at 201


def test_a_receipt_not_for_the_head_of_the_window_is_a_protocol_error():
    p = producer()
    p.window.append((10, 5, 1, 0))
    with pytest.raises(ProtocolError, match="expected 10"):
        p.on_receipts(11, 1, MS)
    with pytest.raises(ProtocolError, match="nothing in flight"):
        p.on_receipts(10, 6, MS)  # one more than was written


def test_an_error_takes_its_entry_out_of_its_record():
    p = producer()
    p.window.extend([(0, 5, 1, 0), (5, 1, 10, 0)])
    p.pending = 15
    p.on_error(2, 2, "disk")  # the third entry of the first write
    assert list(p.window) == [(0, 2, 1, 0), (3, 2, 1, 0), (5, 1, 10, 0)]
    p.on_error(5, 2, "disk")  # the batched entry: its 10 messages
    assert list(p.window) == [(0, 2, 1, 0), (3, 2, 1, 0)]
    assert p.pending == 4 and settled(p)[1] == 11
    p.on_error(99, 2, "disk")  # unknown: counted, nothing removed
    assert len(p.window) == 2 and settled(p)[1] == 12
