"""Durations and sizes on the admin command line."""
from __future__ import annotations

import pytest
import typer

from magnetar.admin.cli import parse_duration, parse_size
from magnetar.admin.client import message_id_body, namespace_path, topic_path


def test_durations():
    assert parse_duration("30") == 30
    assert parse_duration("30", "m") == 1800
    assert parse_duration("2h") == 7200 and parse_duration("1w") == 604800
    assert parse_duration("-1") == -1
    for bad in ("", "1y", "-2", "1.5h", "h"):
        with pytest.raises(typer.Exit):
            parse_duration(bad)


def test_sizes():
    assert parse_size("512") == 512
    assert parse_size("10M") == 10 * 1024 * 1024 and parse_size("1g") == 1 << 30
    assert parse_size("-1") == -1
    for bad in ("10MB", "x", "-5"):
        with pytest.raises(typer.Exit):
            parse_size(bad)


def test_client_paths():
    assert topic_path("t") == "persistent/public/default/t"
    assert topic_path("persistent://a/b/c:d") == "persistent/a/b/c%3Ad"
    assert namespace_path("a/b") == "a/b"
    for bad in ("a/b/c/d", "non-persistent://a/b/c", "a//c"):
        with pytest.raises(ValueError):
            topic_path(bad)
    with pytest.raises(ValueError):
        namespace_path("a")
    assert message_id_body("3:4") == {"ledgerId": 3, "entryId": 4}
    assert message_id_body("earliest") == "earliest"
    with pytest.raises(ValueError):
        message_id_body("3")
