"""Stored records -> entries: the compiled parse_frames and its pure-Python
twin give the same entries, or the same ValueError, for any buffer (intact,
cut short, a byte flipped), and the file ledger's reads go through it."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol.compiled import hot
from magnetar.storage.framing import frames, parse_frames_python


def _outcome(fn, buf, count):
    try:
        return ("ok", fn(buf, count))
    except ValueError as exc:
        return ("error", str(exc))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), max_size=8), st.integers(0, 10), st.data())
def test_compiled_matches_the_twin(datas, extra, data):
    buf = bytearray(frames(datas))
    change = data.draw(st.sampled_from(["none", "cut", "flip"]))
    if change == "cut" and buf:
        del buf[data.draw(st.integers(0, len(buf) - 1)):]
    elif change == "flip" and buf:
        buf[data.draw(st.integers(0, len(buf) - 1))] ^= 0x5A
    count = data.draw(st.integers(0, len(datas) + extra))
    want = _outcome(parse_frames_python, bytes(buf), count)
    assert _outcome(hot.parse_frames, bytes(buf), count) == want
    assert _outcome(hot.parse_frames, memoryview(bytes(buf)), count) == want
    if change == "none" and count <= len(datas):
        assert want == ("ok", datas[:count])


def test_a_negative_count_is_refused():
    with pytest.raises(ValueError):
        hot.parse_frames(b"", -1)
