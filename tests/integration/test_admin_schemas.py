"""The schema admin endpoints with Pulsar's paths and shapes: versions,
compatibility, deletion; the official client's schemas show up there."""
from __future__ import annotations

import json

import pulsar
from pulsar.schema import AvroSchema, Integer, Record, String

from tests.helpers import shared_broker
from .admin_support import call, ok, refused

S = "schemas/public/default"


broker = shared_broker()


def _avro(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": list(fields)})


def test_versions_compatibility_and_deletion(broker):
    refused(broker, "GET", f"{S}/orders/schema", 404)
    v1 = {"type": "AVRO", "schema": _avro({"name": "id", "type": "int"}), "properties": {"team": "billing"}}
    assert ok(broker, "POST", f"{S}/orders/schema", v1) == {"version": 0}
    assert ok(broker, "POST", f"{S}/orders/schema", v1) == {"version": 0}  # the same again: same version
    latest = ok(broker, "GET", f"{S}/orders/schema")
    assert latest["version"] == 0 and latest["type"] == "AVRO" and latest["properties"] == {"team": "billing"}
    assert json.loads(latest["data"])["fields"][0]["name"] == "id"
    # A field with a default is FULL-compatible; one without is not.
    v2 = {"type": "AVRO", "schema": _avro({"name": "id", "type": "int"},
                                         {"name": "note", "type": "string", "default": ""})}
    bad = {"type": "AVRO", "schema": _avro({"name": "id", "type": "int"}, {"name": "note", "type": "string"})}
    assert ok(broker, "POST", f"{S}/orders/compatibility", v2)["compatibility"] is True
    assert ok(broker, "POST", f"{S}/orders/compatibility", bad) == {
        "compatibility": False, "schemaCompatibilityStrategy": "FULL"}
    refused(broker, "POST", f"{S}/orders/schema", 409, bad)
    assert ok(broker, "POST", f"{S}/orders/schema", v2) == {"version": 1}
    assert [r["version"] for r in ok(broker, "GET", f"{S}/orders/schemas")["getSchemaResponses"]] == [0, 1]
    assert ok(broker, "GET", f"{S}/orders/schema/0")["version"] == 0
    refused(broker, "GET", f"{S}/orders/schema/7", 404)
    assert ok(broker, "POST", f"{S}/orders/version", v1) == {"version": 0}
    refused(broker, "POST", f"{S}/orders/schema", 400, {"type": "TELEPATHY", "schema": "?"})
    refused(broker, "POST", f"{S}/orders/schema", 400, ["not", "an", "object"])
    assert ok(broker, "DELETE", f"{S}/orders/schema") == {"version": 1}
    refused(broker, "GET", f"{S}/orders/schema", 404)


class Payment(Record):
    id = Integer()
    who = String()


def test_a_producers_schema_is_visible_through_the_admin_api(broker):
    client = pulsar.Client(broker.service_url)
    try:
        client.create_producer("persistent://public/default/payments", schema=AvroSchema(Payment))
    finally:
        client.close()
    latest = ok(broker, "GET", f"{S}/payments/schema")
    assert latest["type"] == "AVRO" and {f["name"] for f in json.loads(latest["data"])["fields"]} == {"id", "who"}
    assert call(broker, "GET", f"{S}/payments/schemas")[0] == 200


def test_the_admin_cli_uploads_and_shows_a_schema(broker, tmp_path):
    from typer.testing import CliRunner

    from magnetar.cli import app

    payload = tmp_path / "schema.json"
    payload.write_text(json.dumps({"type": "JSON", "schema": _avro({"name": "x", "type": "int"})}))
    base = ["admin", "--admin-url", broker.admin_url, "--json"]
    runner = CliRunner()
    uploaded = runner.invoke(app, base + ["schemas", "upload", "persistent://public/default/cli-schema",
                                          "-f", str(payload)])
    assert uploaded.exit_code == 0 and json.loads(uploaded.stdout) == {"version": 0}
    shown = runner.invoke(app, base + ["schemas", "get", "persistent://public/default/cli-schema"])
    assert json.loads(shown.stdout)["type"] == "JSON"
    assert runner.invoke(app, base + ["schemas", "delete", "persistent://public/default/cli-schema"]).exit_code == 0
    missing = runner.invoke(app, base + ["schemas", "get", "persistent://public/default/cli-schema"])
    assert missing.exit_code == 1
