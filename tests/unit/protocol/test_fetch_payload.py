"""A FETCH_ENTRIES_RESPONSE's body and a bulk read's byte budget: the
compiled functions (``_hot_fetch.c``) and their pure-Python twins give the
same answers, and the budget's is the one a prefix sum and a bisection give."""
from __future__ import annotations

import struct
from bisect import bisect_left
from itertools import accumulate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol.compiled import hot
from magnetar.protocol.fetch_payload import fetch_payload_python
from magnetar.storage.read_budget import bytes_within_python

ENTRIES = st.lists(st.binary(max_size=40), max_size=30)
RUNS = st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 2**40), ENTRIES), max_size=4)


@settings(max_examples=200)
@given(runs=RUNS)
def test_the_payload_is_the_sizes_then_the_entries_in_order(runs):
    datas = [data for _, _, run in runs for data in run]
    body = fetch_payload_python(runs)
    assert struct.unpack_from(f">I{len(datas)}I", body) == (len(datas), *map(len, datas))
    assert body[4 + 4 * len(datas):] == b"".join(datas)
    if hot is not None:
        assert hot.fetch_payload(runs) == body
        # entries as other buffers (a view, a bytearray) give the same bytes
        assert hot.fetch_payload([(lid, first, [bytearray(d) for d in run]) for lid, first, run in runs]) == body


def test_the_compiled_payload_refuses_what_is_not_a_run_or_an_entry():
    if hot is None:
        return  # test_the_compiled_hot_path_is_built says why
    for bad in ([(1, 2)], [(1, 2, (b"a",))], [(1, 2, [b"a", 3])], "runs"):
        with pytest.raises(TypeError):
            hot.fetch_payload(bad)


@settings(max_examples=300)
@given(datas=ENTRIES, start=st.integers(0, 500), limit=st.integers(0, 1500))
def test_the_budget_keeps_up_to_the_entry_that_reaches_it(datas, start, limit):
    sums = list(accumulate(map(len, datas), initial=start))
    keep = bisect_left(sums, limit, 1)
    expected = (keep, sums[keep] if keep < len(sums) else sums[-1])
    assert bytes_within_python(datas, start, limit) == expected
    if hot is not None:
        assert hot.bytes_within(datas, start, limit) == expected
