"""bench.object_latency's ``--profile-at``: py-spy windows inside one sending
(its first minutes beside its later ones), parsed with a clear error for
anything that is not ``AT:SECONDS``."""
from __future__ import annotations

import argparse

import pytest

from bench.object_latency import profile_windows, profile_windows_arg


def test_windows_are_seconds_into_the_sending_and_lengths():
    assert profile_windows("15:45, 165:45") == [(15.0, 45.0), (165.0, 45.0)]
    assert profile_windows("0:1.5,") == [(0.0, 1.5)]


@pytest.mark.parametrize("text", ["", ",", "15", "15:", ":45", "x:45", "15:x", "-1:10", "15:0.5", "1:2:3"])
def test_anything_else_is_refused_with_what_is_wrong(text):
    with pytest.raises(ValueError, match="AT:SECONDS"):
        profile_windows(text)


def test_argparse_gets_its_own_error_not_a_traceback():
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        profile_windows_arg("15")
    assert str(refused.value).startswith("'15' is not AT:SECONDS")
