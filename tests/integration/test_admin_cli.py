"""``magnetar admin ...`` against a real broker.

The commands run in this process (typer's runner: the same app, argument
parsing, output and exit codes) so the many cases stay fast; one test runs
``python -m magnetar.cli admin ...`` as a user does, in a subprocess.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pulsar
import pytest
from typer.testing import CliRunner

from magnetar.cli import app

from tests.helpers import quiet_logger, shared_broker, wait_for
from .admin_support import call, ok


broker = shared_broker()


def _argv(broker, args, json_output: bool, url: str | None) -> list[str]:
    return ["admin", "--admin-url", url or broker.admin_url, *(["--json"] if json_output else []), *args]


def run(broker, *args: str, json_output: bool = False, url: str | None = None) -> subprocess.CompletedProcess:
    """The command in this process; the answer shaped like a finished subprocess."""
    result = CliRunner().invoke(app, _argv(broker, args, json_output, url))
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def run_process(broker, *args: str, json_output: bool = False, url: str | None = None):
    cmd = [sys.executable, "-m", "magnetar.cli", *_argv(broker, args, json_output, url)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ))


def good(broker, *args: str, json_output: bool = False):
    proc = run(broker, *args, json_output=json_output)
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout) if json_output and proc.stdout.strip() else proc.stdout


def bad(broker, *args: str, code: int = 1, says: str = "") -> str:
    proc = run(broker, *args)
    assert proc.returncode == code, f"{args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "error" in proc.stderr.lower() and says.lower() in proc.stderr.lower(), proc.stderr
    return proc.stderr


def test_tenants_and_namespaces(broker):
    assert "standalone" in good(broker, "clusters", "list")
    assert "Created tenant acme" in good(broker, "tenants", "create", "acme", "--allowed-clusters", "standalone")
    assert "acme" in good(broker, "tenants", "list")
    assert "acme" in good(broker, "tenants", "list", json_output=True)
    bad(broker, "tenants", "create", "acme", says="409")
    bad(broker, "tenants", "create", "other", "-c", "mars", says="mars")
    good(broker, "namespaces", "create", "acme/app")
    assert good(broker, "namespaces", "list", "acme", json_output=True) == ["acme/app"]
    bad(broker, "namespaces", "create", "ghost/app", says="Tenant ghost does not exist")
    bad(broker, "tenants", "delete", "acme", says="still has namespaces")

    good(broker, "namespaces", "set-retention", "acme/app", "--time", "2h", "--size", "-1")
    good(broker, "namespaces", "set-message-ttl", "acme/app", "--ttl", "10m")
    good(broker, "namespaces", "set-deduplication", "acme/app", "--enable")
    good(broker, "namespaces", "set-backlog-quota", "acme/app", "-l", "10M", "-p", "producer_exception")
    quotas = good(broker, "namespaces", "get-backlog-quotas", "acme/app", json_output=True)
    assert quotas["destination_storage"]["limitSize"] == 10 * 1024 * 1024
    assert quotas["destination_storage"]["policy"] == "producer_exception"
    bad(broker, "namespaces", "set-backlog-quota", "acme/app", "-l", "1M", "-p", "drop_everything", says="policy")
    good(broker, "namespaces", "remove-backlog-quota", "acme/app")
    assert good(broker, "namespaces", "get-backlog-quotas", "acme/app", json_output=True) == {}
    good(broker, "namespaces", "set-storage-profile", "acme/app", "cost")  # kept on files too, used on objects
    assert good(broker, "namespaces", "get-storage-profile", "acme/app", json_output=True) == "cost"
    bad(broker, "namespaces", "set-storage-profile", "acme/app", "fast", code=2, says="latency, cost")
    good(broker, "namespaces", "remove-storage-profile", "acme/app")
    policies = good(broker, "namespaces", "policies", "acme/app", json_output=True)
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 120, "retentionSizeInMB": -1}
    assert policies["message_ttl_in_seconds"] == 600 and policies["deduplicationEnabled"] is True
    assert "retention_policies" in good(broker, "namespaces", "policies", "acme/app")  # a table

    # Invalid policies are refused with the broker's reason and change nothing.
    bad(broker, "namespaces", "set-retention", "acme/app", "--time", "0", "--size", "10M", says="single time")
    bad(broker, "namespaces", "set-retention", "acme/app", "--time", "soon", "--size", "1M", code=2,
        says="invalid duration")
    bad(broker, "namespaces", "set-message-ttl", "acme/ghost", "--ttl", "5", says="does not exist")
    assert good(broker, "namespaces", "policies", "acme/app", json_output=True) == policies

    # Replication clusters: set at creation or later; unknown clusters are refused.
    good(broker, "namespaces", "create", "acme/geo", "--clusters", "standalone")
    assert good(broker, "namespaces", "get-clusters", "acme/geo", json_output=True) == ["standalone"]
    bad(broker, "namespaces", "set-clusters", "acme/geo", "--clusters", "standalone,mars", says="mars")
    bad(broker, "namespaces", "create", "acme/geo2", "--clusters", "mars", says="mars")
    good(broker, "namespaces", "set-clusters", "acme/geo", "--clusters", "standalone")
    topic = "persistent://acme/geo/t"
    assert good(broker, "topics", "get-replication-clusters", topic, json_output=True) == []
    assert good(broker, "topics", "get-replication-clusters", topic, "--applied", json_output=True) == ["standalone"]
    good(broker, "topics", "set-replication-clusters", topic, "-c", "standalone")
    assert good(broker, "topics", "get-replication-clusters", topic, json_output=True) == ["standalone"]
    bad(broker, "topics", "set-replication-clusters", topic, "-c", "mars", says="mars")
    good(broker, "topics", "remove-replication-clusters", topic)
    assert good(broker, "topics", "get-replication-clusters", topic, json_output=True) == []
    good(broker, "namespaces", "delete", "acme/geo")

    good(broker, "namespaces", "delete", "acme/app")
    good(broker, "tenants", "delete", "acme")
    assert "acme" not in good(broker, "tenants", "list", json_output=True)


def test_last_message_id_compaction_and_retention(broker):
    topic = "persistent://public/default/cli-compact"
    client = pulsar.Client(broker.service_url, logger=quiet_logger())
    producer = client.create_producer(topic, batching_enabled=False)
    for key in ("a", "b", "a"):
        producer.send(key.encode(), partition_key=key)
    last = good(broker, "topics", "last-message-id", topic, json_output=True)
    assert last["entryId"] == 2
    assert "Compaction of" in good(broker, "topics", "compact", topic)
    wait_for(lambda: good(broker, "topics", "compaction-status", topic, json_output=True)["status"] == "SUCCESS",
             30, what="compaction done")
    good(broker, "namespaces", "set-retention", "public/default", "--time", "1h", "--size", "10M")
    assert good(broker, "namespaces", "get-retention", "public/default", json_output=True) == \
        {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
    client.close()


def test_topics_and_subscriptions(broker):
    topic = "persistent://public/default/cli-topic"
    good(broker, "topics", "create-partitioned-topic", topic, "-p", "2")
    assert good(broker, "topics", "get-partitioned-topic-metadata", topic, json_output=True) == {"partitions": 2}
    bad(broker, "topics", "update-partitioned-topic", topic, "-p", "1", says="more than existing")
    good(broker, "topics", "update-partitioned-topic", topic, "-p", "3")
    listed = good(broker, "topics", "list", "public/default", json_output=True)
    assert f"{topic}-partition-2" in listed
    assert f"{topic}-partition-2" in good(broker, "topics", "list", "public/default")  # table, not wrapped

    plain = "cli-plain"
    good(broker, "topics", "create", plain)
    bad(broker, "topics", "create", plain, says="already exists")
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet_logger())
    try:
        producer = client.create_producer(plain, batching_enabled=False)
        for i in range(6):
            producer.send(f"m{i}".encode())
        producer.close()
    finally:
        client.close()
    good(broker, "topics", "create-subscription", plain, "-s", "audit", "-m", "earliest")
    assert good(broker, "topics", "subscriptions", plain, json_output=True) == ["audit"]

    def backlog() -> int:
        return good(broker, "topics", "stats", plain, json_output=True)["subscriptions"]["audit"]["msgBacklog"]

    assert backlog() == 6
    assert "audit" in good(broker, "topics", "stats", plain)
    assert "Skipped 2 entries of audit" in good(broker, "topics", "skip", plain, "-s", "audit", "-n", "2")
    assert backlog() == 4
    said = good(broker, "topics", "skip", plain, "-s", "audit", "-n", "100")
    assert "Skipped 4 entries of audit (the backlog held 4)" in said
    assert backlog() == 0
    good(broker, "topics", "reset-cursor", plain, "-s", "audit", "--time", "1h")
    assert backlog() == 6
    good(broker, "topics", "reset-cursor", plain, "-s", "audit", "-m", "latest")
    assert backlog() == 0
    good(broker, "topics", "reset-cursor", plain, "-s", "audit", "-m", "earliest")
    good(broker, "topics", "expire-messages", plain, "-s", "audit", "-t", "1h")
    assert backlog() == 6  # nothing is an hour old
    good(broker, "topics", "skip", plain, "-s", "audit", "--all")
    assert backlog() == 0
    internal = good(broker, "topics", "stats-internal", plain, json_output=True)
    assert "audit" in internal["cursors"]
    bad(broker, "topics", "skip", plain, "-s", "audit", code=2, says="--count")
    bad(broker, "topics", "reset-cursor", plain, "-s", "audit", "-m", "twelve", code=2, says="invalid message id")
    before = backlog()
    bad(broker, "topics", "reset-cursor", plain, "-s", "audit", "-m", "999:5", says="does not exist in the topic")
    assert backlog() == before  # refused: the cursor did not move
    bad(broker, "topics", "skip", plain, "-s", "nobody", "-n", "1", says="Subscription nobody not found")

    good(broker, "topics", "unload", plain)
    assert "Terminated" in good(broker, "topics", "terminate", plain)
    assert call(broker, "GET", f"persistent/public/default/{plain}/internalStats")[1]["state"] == "Terminated"
    good(broker, "topics", "unsubscribe", plain, "-s", "audit")
    good(broker, "topics", "delete", plain)
    bad(broker, "topics", "stats", plain, says="404")
    good(broker, "topics", "delete-partitioned-topic", topic)
    assert ok(broker, "GET", "persistent/public/default/partitioned") == []


def test_errors_are_clear(broker):
    bad(broker, "tenants", "list", "--nope", code=2)
    proc = run(broker, "tenants", "list", url="http://127.0.0.1:1")
    assert proc.returncode == 1 and "cannot reach the admin API" in proc.stderr
    bad(broker, "topics", "stats", "a/b/c/d", code=2, says="invalid topic")


def test_the_command_runs_as_a_process(broker):
    table = run_process(broker, "namespaces", "list", "public")
    assert table.returncode == 0 and "public/default" in table.stdout, table.stderr
    policies = run_process(broker, "namespaces", "policies", "public/default", json_output=True)
    assert policies.returncode == 0 and "replication_clusters" in json.loads(policies.stdout)
    refused = run_process(broker, "tenants", "delete", "nobody")
    assert refused.returncode == 1 and "404" in refused.stderr and "nobody" in refused.stderr
    usage = run_process(broker, "topics", "skip", "t", "-s", "s")
    assert usage.returncode == 2 and "--count" in usage.stderr


def test_peek_messages_shows_the_backlog_without_moving_it(broker):
    topic = "persistent://public/default/cli-peek"
    client = pulsar.Client(broker.service_url, logger=quiet_logger())
    try:
        consumer = client.subscribe(topic, "peeker", consumer_type=pulsar.ConsumerType.Shared)
        plain = client.create_producer(topic, batching_enabled=False)
        plain.send(b"first", properties={"k": "v"}, partition_key="key-1")
        plain.send(b"second")
        plain.send(b"\xff\x00binary")
        batched = client.create_producer(topic, batching_enabled=True, batching_max_messages=3,
                                         batching_max_publish_delay_ms=60_000)
        for text in ("b0", "b1", "b2"):
            batched.send_async(text.encode(), None, properties={"i": text})
        batched.flush()
        second = None
        for _ in range(2):  # acknowledge "second" alone: peek passes over it
            msg = consumer.receive(timeout_millis=10_000)
            if msg.data() == b"second":
                second = msg
            else:
                consumer.negative_acknowledge(msg)
        if second is None:
            second = next(m for m in iter(lambda: consumer.receive(timeout_millis=10_000), None)
                          if m.data() == b"second")
        consumer.acknowledge(second)
        consumer.close()  # nothing held back in a receiver queue: the backlog is what it is

        shown = good(broker, "topics", "peek-messages", topic, "-s", "peeker", "-n", "10", json_output=True)
        assert [m["payload"] for m in shown] == ["first", "/wBiaW5hcnk=", "b0", "b1", "b2"]
        assert shown[0]["properties"] == {"k": "v"} and shown[0]["key"] == "key-1"
        assert shown[1]["payloadEncoding"] == "base64"
        assert [m["properties"] for m in shown[2:]] == [{"i": "b0"}, {"i": "b1"}, {"i": "b2"}]
        assert shown[2]["messageId"].endswith(":0") and shown[4]["messageId"].endswith(":2")
        # Peeking moved nothing: the same answer again, and the table form names the payload.
        assert good(broker, "topics", "peek-messages", topic, "-s", "peeker", "-n", "10", json_output=True) == shown
        assert "first" in good(broker, "topics", "peek-messages", topic, "-s", "peeker")
        bad(broker, "topics", "peek-messages", topic, "-s", "ghost", says="not found")
        bad(broker, "topics", "peek-messages", topic, "-s", "peeker", "-n", "0", code=2, says="at least 1")
        # Past the end of the backlog (REST): 404 saying how long it is.
        empty = "persistent://public/default/cli-peek-empty"
        client.subscribe(empty, "nobody").close()
        bad(broker, "topics", "peek-messages", empty, "-s", "nobody", says="no message at position 1")
    finally:
        client.close()


def test_clusters_brokers_and_bundles_of_a_standalone_broker(broker):
    assert good(broker, "clusters", "get", "standalone", json_output=True)["serviceUrl"] == broker.admin_url
    brokers = good(broker, "brokers", "list", json_output=True)  # once a TypeError traceback
    assert brokers == [f"127.0.0.1:{broker.admin_port}"]
    assert good(broker, "brokers", "list", "standalone", json_output=True) == brokers
    bad(broker, "brokers", "list", "mars", says="Cluster mars does not exist")
    assert brokers[0] in good(broker, "brokers", "list")
    assert brokers[0] in good(broker, "brokers", "load")
    assert good(broker, "brokers", "leader", json_output=True)["brokerId"] == brokers[0]
    assert good(broker, "brokers", "lookup", "cli-lookup", json_output=True)["brokerUrl"] == broker.service_url
    bundles = good(broker, "namespaces", "bundles", "public/default", json_output=True)
    assert bundles["numBundles"] == 1 and list(bundles["owners"].values()) == brokers
    # A standalone broker owns every bundle: moving or splitting one is refused with the reason.
    bad(broker, "namespaces", "unload", "public/default", "-t", "cli-lookup", says="standalone")
    bad(broker, "namespaces", "split-bundle", "public/default", "-b", "0x00000000_0xffffffff", says="standalone")
    bad(broker, "namespaces", "unload", "public/default", code=2, says="exactly one of --bundle and --topic")


def test_tenants_get_and_permissions(broker):
    assert good(broker, "tenants", "get", "public", json_output=True)["allowedClusters"] == ["standalone"]
    bad(broker, "tenants", "get", "nobody", says="404")
    good(broker, "namespaces", "grant-permission", "public/default", "--role", "app", "--actions", "produce,consume")
    assert good(broker, "namespaces", "permissions", "public/default", json_output=True)["app"] == \
        ["consume", "produce"]
    topic = "persistent://public/default/cli-perm"
    good(broker, "topics", "grant-permission", topic, "--role", "reader", "--actions", "consume")
    granted = good(broker, "topics", "permissions", topic, json_output=True)
    assert granted["reader"] == ["consume"] and granted["app"] == ["consume", "produce"]
    good(broker, "topics", "revoke-permission", topic, "--role", "reader")
    assert "reader" not in good(broker, "topics", "permissions", topic, json_output=True)
    good(broker, "namespaces", "revoke-permission", "public/default", "--role", "app")
    assert "app" not in good(broker, "namespaces", "permissions", "public/default", json_output=True)
    bad(broker, "namespaces", "grant-permission", "public/default", "--role", "x", "--actions", "fly",
        says="fly")


def test_partitioned_stats_show_each_partition_on_its_own_row(broker):
    topic = "persistent://public/default/cli-pstats"
    good(broker, "topics", "create-partitioned-topic", topic, "-p", "2")
    assert topic in good(broker, "topics", "list-partitioned-topics", "public/default", json_output=True)
    client = pulsar.Client(broker.service_url, logger=quiet_logger())
    try:
        producer = client.create_producer(topic, batching_enabled=False,
                                          message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
        for i in range(4):
            producer.send(f"m{i}".encode())
    finally:
        client.close()
    table = good(broker, "topics", "partitioned-stats", topic)
    rows = [line for line in table.splitlines() if "-partition-" in line]
    assert len(rows) == 2 and all(" 2 " in row for row in rows), table  # 2 messages in each
    assert '{"' not in table, table  # no document crammed into a cell
    internal = good(broker, "topics", "stats-internal", f"{topic}-partition-0")
    assert "ledgers[0].entries" in internal and '{"' not in internal, internal
    good(broker, "topics", "delete-partitioned-topic", topic, "--force")


def test_schemas(broker, tmp_path):
    topic = "persistent://public/default/cli-schema"
    definition = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    payload = tmp_path / "schema.json"
    payload.write_text(json.dumps({"type": "AVRO", "schema": json.dumps(definition), "properties": {}}))
    assert good(broker, "schemas", "upload", topic, "-f", str(payload), json_output=True)["version"] == 0
    got = good(broker, "schemas", "get", topic, json_output=True)
    assert got["type"] == "AVRO" and json.loads(got["data"]) == definition
    assert "AVRO" in good(broker, "schemas", "get", topic, "--version", "0")
    payload.write_text("not json")
    bad(broker, "schemas", "upload", topic, "-f", str(payload), code=2, says="cannot read a schema payload")
    good(broker, "schemas", "delete", topic)
    bad(broker, "schemas", "get", topic, says="404")


def test_clusters_are_created_updated_and_deleted_as_pulsar_answers(broker):
    body = {"serviceUrl": "http://east:8080", "brokerServiceUrl": "pulsar://east:6650"}
    assert call(broker, "PUT", "clusters/east", body) == (204, None)
    assert call(broker, "PUT", "clusters/east", body)[0] == 409
    assert call(broker, "POST", "clusters/mars", body)[0] == 404
    good(broker, "clusters", "update", "east", "--url", "http://east-2:8080", "--broker-url", "pulsar://east-2:6650")
    assert good(broker, "clusters", "get", "east", json_output=True) == \
        {"serviceUrl": "http://east-2:8080", "brokerServiceUrl": "pulsar://east-2:6650"}
    good(broker, "clusters", "create", "west", "--url", "http://west:8080")
    bad(broker, "clusters", "create", "west", says="409")
    assert sorted(good(broker, "clusters", "list", json_output=True)) == ["east", "standalone", "west"]
    # A tenant may now use them; a namespace that replicates to one keeps it.
    good(broker, "tenants", "update", "public", "--allowed-clusters", "standalone,east,west")
    assert good(broker, "tenants", "get", "public", json_output=True)["allowedClusters"] == \
        ["east", "standalone", "west"]
    good(broker, "namespaces", "create", "public/to-east", "--clusters", "standalone,east")
    bad(broker, "clusters", "delete", "east", says="public/to-east")
    bad(broker, "clusters", "delete", "standalone", says="own cluster")
    good(broker, "namespaces", "delete", "public/to-east")
    good(broker, "clusters", "delete", "east")
    assert call(broker, "DELETE", "clusters/west") == (204, None)
    assert call(broker, "DELETE", "clusters/west")[0] == 404
    good(broker, "tenants", "update", "public", "--allowed-clusters", "standalone")


def test_a_namespace_chooses_its_schema_compatibility_strategy(broker, tmp_path):
    topic = "persistent://public/default/cli-strategy"
    path = "namespaces/public/default/schemaCompatibilityStrategy"
    assert good(broker, "namespaces", "get-schema-compatibility-strategy", "public/default",
                json_output=True) == "UNDEFINED"

    def upload(*fields: dict) -> subprocess.CompletedProcess:
        record = {"type": "record", "name": "R", "fields": list(fields)}
        payload = tmp_path / "s.json"
        payload.write_text(json.dumps({"type": "AVRO", "schema": json.dumps(record), "properties": {}}))
        return run(broker, "schemas", "upload", topic, "-f", str(payload))

    a, b = {"name": "a", "type": "int"}, {"name": "b", "type": "string"}  # b has no default
    assert upload(a).returncode == 0
    assert upload(a, b).returncode == 1  # the broker's FULL: a reader of v1 data misses b
    good(broker, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "forward")
    assert call(broker, "GET", path) == (200, "FORWARD")
    assert upload(a, b).returncode == 0  # old readers can read the new version
    good(broker, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "ALWAYS_INCOMPATIBLE")
    refused = upload({"name": "a", "type": "int"}, b, {"name": "c", "type": "int", "default": 0})
    assert refused.returncode == 1 and "ALWAYS_INCOMPATIBLE" in refused.stderr
    assert call(broker, "PUT", path, "SOMETIMES")[0] == 400
    good(broker, "namespaces", "set-schema-compatibility-strategy", "public/default", "-c", "UNDEFINED")
    assert call(broker, "GET", path) == (200, "UNDEFINED")
    good(broker, "schemas", "delete", topic)


def test_get_message_by_id_and_examine_message(broker):
    topic = "persistent://public/default/cli-examine"
    client = pulsar.Client(broker.service_url, logger=quiet_logger())
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode(), properties={"i": str(i)}) for i in range(4)]
    finally:
        client.close()
    second = ids[1]
    shown = good(broker, "topics", "get-message-by-id", topic, "-l", str(second.ledger_id()),
                 "-e", str(second.entry_id()), json_output=True)
    assert [m["payload"] for m in shown] == ["m1"] and shown[0]["properties"] == {"i": "1"}
    bad(broker, "topics", "get-message-by-id", topic, "-l", str(second.ledger_id()), "-e", "99", says="not found")
    first = good(broker, "topics", "examine-message", topic, "-i", "earliest", json_output=True)
    assert first[0]["payload"] == "m0"
    assert good(broker, "topics", "examine-message", topic, json_output=True)[0]["payload"] == "m3"
    assert good(broker, "topics", "examine-message", topic, "-m", "2", json_output=True)[0]["payload"] == "m2"
    assert "m2" in good(broker, "topics", "examine-message", topic, "-m", "2")
    bad(broker, "topics", "examine-message", topic, "-m", "5", says="fewer than 5")
    bad(broker, "topics", "examine-message", topic, "-i", "middle", code=2, says="earliest or latest")
    # REST, as Pulsar: the query parameters and the payload with X-Pulsar-* headers.
    assert call(broker, "GET", "persistent/public/default/cli-examine/examinemessage?messagePosition=0")[0] == 400


def test_topic_level_policies_override_the_namespace_and_are_enforced(broker):
    topic = "persistent://public/default/cli-topic-policies"
    path = "persistent/public/default/cli-topic-policies"
    bad(broker, "topics", "set-max-producers", topic, "-p", "1", says="does not exist")
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=10, logger=quiet_logger())
    try:
        client.create_producer(topic).close()  # the topic exists
        assert call(broker, "GET", f"{path}/maxProducers") == (204, None)  # not set
        good(broker, "topics", "set-max-producers", topic, "-p", "1")
        assert good(broker, "topics", "get-max-producers", topic, json_output=True) == 1
        first = client.create_producer(topic, producer_name="first")
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic, producer_name="second")
        good(broker, "topics", "remove-max-producers", topic)
        client.create_producer(topic, producer_name="second").close()  # no limit any more

        good(broker, "topics", "set-max-consumers", topic, "-c", "1")
        held = client.subscribe(topic, "a", consumer_type=pulsar.ConsumerType.Shared)
        with pytest.raises(pulsar.ConsumerBusy):
            client.subscribe(topic, "b")
        held.close()
        good(broker, "topics", "remove-max-consumers", topic)
        assert good(broker, "topics", "get-max-consumers", topic) .strip().startswith("(not set")

        # Deduplication on the topic alone (its namespace leaves it off): a resent sequence id is not stored.
        good(broker, "topics", "set-deduplication", topic, "--enable")
        assert call(broker, "GET", f"{path}/deduplicationEnabled") == (200, True)
        assert good(broker, "topics", "get-deduplication", topic, json_output=True) is True
        wait_for(lambda: good(broker, "topics", "stats", topic, json_output=True)["deduplicationEnabled"], 10,
                 what="the loaded topic sees the policy")
        first.close()
        dedup = client.create_producer(topic, producer_name="dedup", batching_enabled=False)
        dedup.send(b"x", sequence_id=5)
        before = good(broker, "topics", "stats", topic, json_output=True)["msgInCounter"]
        dedup.send(b"x", sequence_id=5)
        assert good(broker, "topics", "stats", topic, json_output=True)["msgInCounter"] == before
        dedup.close()
        good(broker, "topics", "remove-deduplication", topic)

        # TTL, retention and backlog quotas: the topic's own, and the one in force.
        good(broker, "namespaces", "set-message-ttl", "public/default", "--ttl", "1h")
        assert good(broker, "topics", "get-message-ttl", topic, "--applied", json_output=True) == 3600
        good(broker, "topics", "set-message-ttl", topic, "--ttl", "2m")
        assert call(broker, "GET", f"{path}/messageTTL?applied=true") == (200, 120)
        assert call(broker, "POST", f"{path}/messageTTL?messageTTL=soon")[0] == 400
        good(broker, "topics", "remove-message-ttl", topic)
        good(broker, "namespaces", "set-message-ttl", "public/default", "--ttl", "0")
        good(broker, "topics", "set-retention", topic, "--time", "1h", "--size", "5M")
        assert good(broker, "topics", "get-retention", topic, json_output=True) == \
            {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5}
        good(broker, "topics", "remove-retention", topic)

        # A backlog quota on the topic refuses a new producer while its backlog is over it.
        reader = client.subscribe(topic, "slow")
        filler = client.create_producer(topic, batching_enabled=False)
        for _ in range(4):
            filler.send(b"y" * 1024)
        filler.close()
        good(broker, "topics", "set-backlog-quota", topic, "-l", "1k", "-p", "producer_exception")
        assert good(broker, "topics", "get-backlog-quotas", topic, json_output=True)["destination_storage"] \
            ["limitSize"] == 1024
        with pytest.raises(pulsar.ProducerBlockedQuotaExceededException):
            client.create_producer(topic)
        good(broker, "topics", "remove-backlog-quota", topic)
        assert good(broker, "topics", "get-backlog-quotas", topic, json_output=True) == {}
        client.create_producer(topic).close()
        reader.close()
    finally:
        client.close()


def test_a_publish_rate_slows_producers_down_without_failing_them(broker):
    topic = "persistent://public/default/cli-throttled"
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        # A small send window, as a steady stream has: what is already read is
        # stored, the next read waits (a burst inside one read is not slowed).
        producer = client.create_producer(topic, batching_enabled=False, send_timeout_millis=60_000,
                                          max_pending_messages=5, block_if_queue_full=True)

        def send_all(n: int) -> float:
            results: list = []
            started = time.monotonic()
            for i in range(n):
                producer.send_async(b"x", lambda res, _mid: results.append(res))
            producer.flush()
            wait_for(lambda: len(results) == n, 30, what="every receipt")
            assert set(results) == {pulsar.Result.Ok}, results  # slowed, never failed
            return time.monotonic() - started

        free = send_all(60)
        good(broker, "topics", "set-publish-rate", topic, "-m", "20")
        assert good(broker, "topics", "get-publish-rate", topic, json_output=True) == \
            {"publishThrottlingRateInMsg": 20, "publishThrottlingRateInByte": -1}
        throttled = send_all(60)  # 20 in the bucket, then 40 more at 20 msg/s
        assert throttled >= 1.5 and throttled > 2 * free, (free, throttled)
        good(broker, "topics", "remove-publish-rate", topic)
        good(broker, "namespaces", "set-publish-rate", "public/default", "-m", "1000000")
        assert good(broker, "namespaces", "get-publish-rate", "public/default", json_output=True) \
            ["publishThrottlingRateInMsg"] == 1000000
        good(broker, "namespaces", "remove-publish-rate", "public/default")
        assert call(broker, "POST", "namespaces/public/default/publishRate",
                    {"publishThrottlingRateInMsg": "fast"})[0] == 400
    finally:
        client.close()


def _received_within(consumer, seconds: float, most: int) -> int:
    """Messages the consumer receives (and acknowledges) in ``seconds``, at most ``most``."""
    got = 0
    deadline = time.monotonic() + seconds
    while got < most and (left := deadline - time.monotonic()) > 0:
        try:
            msg = consumer.receive(timeout_millis=max(1, int(left * 1000)))
        except pulsar.Timeout:
            break
        consumer.acknowledge(msg)
        got += 1
    return got


def test_a_dispatch_rate_holds_consumers_to_it_until_it_is_removed(broker):
    ok(broker, "PUT", "namespaces/public/dispatch")
    topic = "persistent://public/dispatch/limited"
    good(broker, "namespaces", "set-dispatch-rate", "public/dispatch", "-md", "10", "-dt", "1")
    assert good(broker, "namespaces", "get-dispatch-rate", "public/dispatch", json_output=True) == {
        "dispatchThrottlingRateInMsg": 10, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1,
        "relativeToPublishRate": False}
    client = pulsar.Client(broker.service_url, operation_timeout_seconds=30, logger=quiet_logger())
    try:
        consumer = client.subscribe(topic, "slow", receiver_queue_size=1000)
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(200):
            producer.send_async(b"m%d" % i, None)
        producer.flush()
        # 10 msg/s: the bucket's 10, then 10 a second. Without the limit all 200 come at once.
        limited = _received_within(consumer, 3.0, 200)
        assert 10 <= limited <= 60, limited
        good(broker, "namespaces", "remove-dispatch-rate", "public/dispatch")
        rest = _received_within(consumer, 4.0, 200 - limited)
        assert rest == 200 - limited, (limited, rest)  # at 10 msg/s, at most 50 would come in 4 s

        # The other verbs: the subscription rates, a topic's own over its namespace's.
        good(broker, "namespaces", "set-subscription-dispatch-rate", "public/dispatch", "-md", "500", "-bd", "1048576")
        good(broker, "topics", "set-subscription-dispatch-rate", topic, "-md", "200", "-dt", "2")
        assert good(broker, "topics", "get-subscription-dispatch-rate", topic, "--applied", json_output=True) \
            ["ratePeriodInSecond"] == 2  # the topic's wins
        good(broker, "topics", "remove-subscription-dispatch-rate", topic)
        assert good(broker, "namespaces", "get-subscription-dispatch-rate", "public/dispatch",
                    json_output=True)["dispatchThrottlingRateInByte"] == 1048576
        good(broker, "namespaces", "remove-subscription-dispatch-rate", "public/dispatch")
        good(broker, "topics", "set-dispatch-rate", topic, "-bd", "4096")
        assert good(broker, "topics", "get-dispatch-rate", topic, json_output=True)["dispatchThrottlingRateInByte"] \
            == 4096
        good(broker, "topics", "remove-dispatch-rate", topic)
        assert ok(broker, "GET", "persistent/public/dispatch/limited/dispatchRate?applied=true") is None
        assert call(broker, "POST", "persistent/public/dispatch/limited/dispatchRate",
                    {"dispatchThrottlingRateInMsg": 5, "relativeToPublishRate": True})[0] == 400
        assert call(broker, "POST", "namespaces/public/dispatch/subscriptionDispatchRate",
                    {"ratePeriodInSecond": 0})[0] == 400
    finally:
        client.close()
