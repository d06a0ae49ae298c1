"""The web console's pure parts: which files it serves, how payloads read."""
from __future__ import annotations

import struct

from magnetar.admin.console.assets import asset_path, is_asset
from magnetar.admin.console.browse import decode_payload


def test_only_files_under_static_are_served():
    assert asset_path("app.js") is not None
    assert asset_path("pages/topic.js") is not None
    assert asset_path("vendor/uPlot.iife.min.js") is not None
    assert asset_path("../assets.py") is None
    assert asset_path("pages/../../browse.py") is None
    assert asset_path("missing.js") is None
    assert asset_path("pages") is None  # a folder is not a file


def test_the_page_and_files_are_open_and_the_api_is_not():
    assert is_asset("/console/") and is_asset("/console") and is_asset("/console/app.js")
    assert not is_asset("/console/api/topics")
    assert not is_asset("/admin/v2/tenants")


def test_payloads_read_by_the_schema():
    assert decode_payload(b'{"a": 1}', "JSON") == {"value": {"a": 1}, "encoding": "json"}
    assert decode_payload(b"not json", "JSON")["note"] == "not valid JSON"
    assert decode_payload("héllo".encode(), "STRING") == {"value": "héllo", "encoding": "text"}
    assert decode_payload(struct.pack(">q", -5), "INT64") == {"value": -5, "encoding": "number"}
    assert decode_payload(b"\x01", "BOOL") == {"value": True, "encoding": "boolean"}
    raw = decode_payload(b"\xff\xfe", None)
    assert raw["encoding"] == "base64" and raw["value"] == "//4="
    avro = decode_payload(b"\x02\x04", "AVRO")
    assert avro["encoding"] == "base64" and "AVRO" in avro["note"]


def test_a_produced_message_body_is_checked_field_by_field():
    import pytest

    from magnetar.admin.console.produce import parse_message
    from magnetar.admin.errors import AdminError

    assert parse_message({"key": "k", "properties": {"a": "1"}, "value": "v"}) == ("k", {"a": "1"}, "v")
    assert parse_message({"value": "v", "key": ""}) == (None, {}, "v")
    for body, said in [([], "JSON object"), ({"value": 3}, "value must be a string"),
                       ({"properties": {"a": 1}}, "string values"), ({"properties": {"": "x"}}, "needs a name"),
                       ({"key": 7}, "key must be"), ({"valeu": "x"}, "unknown field(s) valeu")]:
        with pytest.raises(AdminError) as caught:
            parse_message(body)
        assert caught.value.status == 400 and said in str(caught.value), (body, str(caught.value))


class _Rates:
    def rates(self, counters):
        return (float(counters[0]), 0.0, float(counters[2]), 0.0)


class _Topic:
    def __init__(self, n: int) -> None:
        self.rates, self.msg_in, self.bytes_in, self.msg_out, self.bytes_out = _Rates(), n, 0, n // 2, 0


def test_the_rate_history_is_bounded_in_points_and_topics_and_forgets_unloaded_ones():
    from magnetar.admin.console.history import RateHistory

    history = RateHistory(points=3, max_topics=2)
    topics = {f"persistent://t/ns/x{i}": _Topic(i) for i in range(3)}
    for second in range(5):
        history.sample(topics, now=1000.0 + second)
    assert len(history.rings) == 2  # the third topic is not kept
    assert history.of("persistent://t/ns/x1") == [[1002.0, 1.0, 0.0], [1003.0, 1.0, 0.0], [1004.0, 1.0, 0.0]]
    del topics["persistent://t/ns/x0"]
    history.sample(topics, now=1005.0)
    assert "persistent://t/ns/x0" not in history.rings and len(history.rings) == 2  # x2 takes its place
    assert history.of("persistent://t/ns/missing") == []


def test_a_full_rate_history_samples_its_kept_topics_without_visiting_every_loaded_one():
    from magnetar.admin.console.history import RateHistory

    class _Counted(dict):
        visits = 0

        def items(self):
            _Counted.visits += 1
            return super().items()

    history = RateHistory(points=3, max_topics=2)
    topics = _Counted({f"persistent://t/ns/x{i}": _Topic(i) for i in range(10_000)})
    history.sample(topics, now=1000.0)
    visits = _Counted.visits
    history.sample(topics, now=1001.0)
    assert _Counted.visits == visits  # full: only its two topics were read
    assert history.of("persistent://t/ns/x1") == [[1000.0, 1.0, 0.0], [1001.0, 1.0, 0.0]]


def test_a_partitioned_topics_row_sums_its_partitions():
    from magnetar.admin.console.listing import parent_of, parent_row

    assert parent_of("persistent://t/ns/orders-partition-12") == "persistent://t/ns/orders"
    assert parent_of("persistent://t/ns/orders-partition-x") == "persistent://t/ns/orders-partition-x"
    figures = {f"persistent://t/ns/o-partition-{i}": {"msgRateIn": 1.5, "backlog": i, "subscriptions": 2,
                                                        "producers": 1, "owner": f"b{i % 2}"} for i in range(3)}
    row = parent_row("persistent://t/ns/o", 4, figures)
    assert row["partitions"] == 4 and row["loadedPartitions"] == 3
    assert row["msgRateIn"] == 4.5 and row["backlog"] == 3 and row["producers"] == 3
    assert row["subscriptions"] == 2  # the same two subscriptions on each partition
    assert row["owner"] == "2 brokers" and row["owners"] == ["b0", "b1"]


def test_partitions_rate_histories_sum_by_sampling_interval():
    from magnetar.admin.console.history import summed

    a = [[1000.1, 1.0, 0.5], [1002.1, 2.0, 0.0]]
    b = [[1000.4, 3.0, 1.0], [1001.9, 1.0, 1.0], [1004.0, 5.0, 0.0]]  # another broker, other moments
    assert summed([a, b]) == [[1000.0, 4.0, 1.5], [1002.0, 3.0, 1.0], [1004.0, 5.0, 0.0]]
    assert summed([]) == []
