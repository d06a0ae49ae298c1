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
