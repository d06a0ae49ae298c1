"""The admin REST API through raw HTTP: resources, policies, topics,
subscriptions; bad input gets a clear JSON reason and changes nothing."""
from __future__ import annotations

import re
import time
import urllib.request

import pulsar
import pytest

from tests.helpers import shared_broker, shared_client, wait_for
from .admin_support import call, ok, refused

T = "persistent/public/default"


broker = shared_broker("stats_update_frequency_s = 0.5\n")  # rates of half-second intervals
client = shared_client()


def test_standalone_starts_with_cluster_tenant_and_namespace(broker):
    assert ok(broker, "GET", "clusters") == ["standalone"]
    assert ok(broker, "GET", "clusters/standalone")["brokerServiceUrl"].endswith(f":{broker.port}")
    assert "public" in ok(broker, "GET", "tenants")
    assert ok(broker, "GET", "namespaces/public") == ["public/default"]
    refused(broker, "GET", "clusters/elsewhere", 404, reason="does not exist")
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/brokers/health", timeout=10) as resp:
        assert resp.read() == b"ok"
    from magnetar import __version__
    with urllib.request.urlopen(f"{broker.admin_url}/admin/v2/brokers/version", timeout=10) as resp:
        assert resp.read().decode() == __version__


def test_tenants(broker):
    refused(broker, "GET", "tenants/acme", 404, reason="Tenant acme does not exist")
    # Refused creations leave nothing behind.
    refused(broker, "PUT", "tenants/acme", 412, {"allowedClusters": ["mars"]}, reason="mars")
    refused(broker, "PUT", "tenants/acme", 400, raw=b'{"adminRoles": [', reason="malformed JSON")
    refused(broker, "PUT", "tenants/acme", 400, {"adminRoles": "root"}, reason="adminRoles")
    refused(broker, "PUT", "tenants/bad%20name", 412, reason="invalid tenant name")
    assert "acme" not in ok(broker, "GET", "tenants")
    ok(broker, "PUT", "tenants/acme", {"adminRoles": ["ops"], "allowedClusters": ["standalone"]})
    assert ok(broker, "GET", "tenants/acme") == {"adminRoles": ["ops"], "allowedClusters": ["standalone"]}
    refused(broker, "PUT", "tenants/acme", 409, reason="already exists")
    ok(broker, "PUT", "namespaces/acme/app")
    refused(broker, "DELETE", "tenants/acme", 409, reason="acme/app")
    ok(broker, "DELETE", "namespaces/acme/app")
    ok(broker, "DELETE", "tenants/acme")
    refused(broker, "DELETE", "tenants/acme", 404)


def test_namespace_policies(broker):
    refused(broker, "PUT", "namespaces/nobody/ns", 404, reason="Tenant nobody does not exist")
    ok(broker, "PUT", "namespaces/public/pol")
    refused(broker, "PUT", "namespaces/public/pol", 409, reason="already exists")
    base = "namespaces/public/pol"
    policies = ok(broker, "GET", base)
    assert policies["retention_policies"] is None and policies["replication_clusters"] == ["standalone"]

    ok(broker, "POST", f"{base}/retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1})
    for bad, why in [
        ({"retentionTimeInMinutes": 60, "retentionSizeInMB": 0}, "single time or size limit"),
        ({"retentionTimeInMinutes": "1h", "retentionSizeInMB": 5}, "integer"),
        ({"retentionTimeInMinutes": -2, "retentionSizeInMB": 5}, ">= -1"),
        ({"retentionTimeInMinutes": 5}, "both"),
        ({"retentionTimeInMinutes": 5, "retentionSizeInMB": 5, "extra": 1}, "unknown"),
        ([60, 5], "JSON object"),
    ]:
        refused(broker, "POST", f"{base}/retention", 400, bad, reason=why)
    refused(broker, "POST", f"{base}/retention", 400, raw=b"{not json", reason="malformed JSON")
    refused(broker, "POST", f"{base}/retention", 400, raw=b"", reason="body is required")
    assert ok(broker, "GET", f"{base}/retention") == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}

    ok(broker, "POST", f"{base}/messageTTL", 120)
    refused(broker, "POST", f"{base}/messageTTL", 400, -5, reason=">= 0")
    refused(broker, "POST", f"{base}/messageTTL", 400, "2m", reason="integer")
    ok(broker, "POST", f"{base}/deduplication", True)
    refused(broker, "POST", f"{base}/deduplication", 400, "yes", reason="true or false")
    ok(broker, "POST", f"{base}/backlogQuota", {"limitSize": 1 << 30, "limitTime": -1, "policy": "producer_exception"})
    refused(broker, "POST", f"{base}/backlogQuota", 400, {"limitSize": 1, "policy": "drop"}, reason="policy")
    refused(broker, "POST", f"{base}/replication", 412, ["standalone", "mars"], reason="mars")
    refused(broker, "POST", f"{base}/replication", 400, [], reason="non-empty")
    ok(broker, "POST", f"{base}/replication", ["standalone"])

    policies = ok(broker, "GET", base)
    assert policies["message_ttl_in_seconds"] == 120
    assert policies["deduplicationEnabled"] is True
    assert policies["backlog_quota_map"]["destination_storage"]["policy"] == "producer_exception"
    assert policies["retention_policies"] == {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}
    ok(broker, "DELETE", f"{base}/messageTTL")
    assert ok(broker, "GET", f"{base}/messageTTL") is None
    # Policies of a namespace that does not exist: 404 even with a good body.
    refused(broker, "POST", "namespaces/public/ghost/messageTTL", 404, 10, reason="does not exist")
    refused(broker, "GET", "namespaces/public/ghost", 404)


def test_namespace_with_topics_needs_force(broker, client):
    ok(broker, "PUT", "namespaces/public/full")
    ok(broker, "PUT", "persistent/public/full/t1")
    ok(broker, "PUT", "persistent/public/full/p/partitions", 2)
    refused(broker, "DELETE", "namespaces/public/full", 409, reason="non empty")
    assert ok(broker, "GET", "persistent/public/full")  # nothing was deleted
    ok(broker, "DELETE", "namespaces/public/full?force=true")
    refused(broker, "GET", "namespaces/public/full", 404)
    refused(broker, "GET", "persistent/public/full", 404)


def test_topics_and_partitioned_topics(broker):
    refused(broker, "PUT", "persistent/public/ghost/t", 404, reason="Namespace public/ghost does not exist")
    ok(broker, "PUT", f"{T}/plain")
    refused(broker, "PUT", f"{T}/plain", 409, reason="already exists")
    refused(broker, "PUT", f"{T}/plain/partitions", 409, 3, reason="non-partitioned")
    assert ok(broker, "GET", f"{T}/plain/partitions") == {"partitions": 0}
    refused(broker, "GET", f"{T}/nothing/partitions", 404)

    for bad in (0, -1, "4", 2.5, True, 100_000):
        refused(broker, "PUT", f"{T}/parted/partitions", 400, bad, reason="number of partitions")
    refused(broker, "PUT", f"{T}/parted/partitions", 400, raw=b"four", reason="malformed JSON")
    refused(broker, "GET", f"{T}/parted/partitions", 404)  # bad input created nothing
    ok(broker, "PUT", f"{T}/parted/partitions", 3)
    refused(broker, "PUT", f"{T}/parted/partitions", 409, 3, reason="already exists")
    refused(broker, "PUT", f"{T}/parted", 409, reason="partitioned")
    assert ok(broker, "GET", f"{T}/partitioned") == ["persistent://public/default/parted"]
    topics = ok(broker, "GET", T)
    assert {f"persistent://public/default/parted-partition-{i}" for i in range(3)} <= set(topics)
    assert "persistent://public/default/plain" in topics
    refused(broker, "POST", f"{T}/parted/partitions", 409, 2, reason="must be more than existing 3")
    refused(broker, "POST", f"{T}/parted/partitions", 409, 3)
    ok(broker, "POST", f"{T}/parted/partitions", 5)
    assert ok(broker, "GET", f"{T}/parted/partitions") == {"partitions": 5}
    refused(broker, "POST", f"{T}/plain/partitions", 404, 5)
    refused(broker, "GET", f"{T}/parted/stats", 404, reason="partitioned")

    ok(broker, "DELETE", f"{T}/parted/partitions")
    refused(broker, "GET", f"{T}/parted/partitions", 404)
    assert not any("parted" in t for t in ok(broker, "GET", T))
    ok(broker, "DELETE", f"{T}/plain")
    refused(broker, "DELETE", f"{T}/plain", 404)
    refused(broker, "PUT", f"{T}/bad%20name", 412, reason="not valid")


def test_stats_are_shaped_like_pulsars(broker, client):
    producer = client.create_producer("stats-shape", producer_name="shaper")
    consumer = client.subscribe("stats-shape", "watcher")
    producer.send(b"x")
    stats = ok(broker, "GET", f"{T}/stats-shape/stats")
    assert stats["msgInCounter"] == 1 and stats["storageSize"] > 0
    assert stats["publishers"][0]["producerName"] == "shaper"
    sub = stats["subscriptions"]["watcher"]
    assert {"type", "msgBacklog", "consumers"} <= set(sub) and len(sub["consumers"]) == 1
    internal = ok(broker, "GET", f"{T}/stats-shape/internalStats")
    assert internal["state"] == "LedgerOpened" and internal["numberOfEntries"] == 1
    assert {"ledgerId", "entries", "size"} <= set(internal["ledgers"][0])
    assert "markDeletePosition" in internal["cursors"]["watcher"]
    refused(broker, "GET", f"{T}/no-such-topic/stats", 404)
    refused(broker, "GET", f"{T}/no-such-topic/internalStats", 404)
    producer.close()
    consumer.close()


def test_stats_carry_pulsars_rates_counters_and_times(broker, client):
    topic = f"{T}/stats-rates"
    producer = client.create_producer("stats-rates", batching_enabled=False)
    consumer = client.subscribe("stats-rates", "reader")
    client.subscribe("stats-rates", "idle").close()  # a subscription whose consumer left
    ok(broker, "GET", f"{topic}/stats")  # the first look marks the counters
    for i in range(100):
        producer.send(b"x" * 50)
    for _ in range(100):
        consumer.acknowledge(consumer.receive(10_000))
    stats = wait_for(lambda: (s := ok(broker, "GET", f"{topic}/stats"))["msgRateIn"] > 0 and s, 10,
                     what="a rate measured over a second")
    assert stats["msgInCounter"] == 100 and stats["msgOutCounter"] == 100
    assert stats["msgThroughputIn"] > 0 and stats["msgRateOut"] > 0 and stats["msgThroughputOut"] > 0
    assert 50 < stats["averageMsgSize"] < 500  # bytes per message: the payload plus its framing
    assert stats["subscriptions"]["reader"]["msgOutCounter"] == 100
    assert stats["subscriptions"]["idle"]["type"] == "Exclusive"  # never null
    since = stats["publishers"][0]["connectedSince"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", since), since
    assert re.fullmatch(r"\d{4}-.*Z", stats["subscriptions"]["reader"]["consumers"][0]["connectedSince"])
    producer.close()
    consumer.close()


def _backlog(broker, topic: str, sub: str) -> int:
    return ok(broker, "GET", f"{T}/{topic}/stats")["subscriptions"][sub]["msgBacklog"]


def test_subscription_operations(broker, client):
    producer = client.create_producer("subs", batching_enabled=False)
    ids = [producer.send(f"m{i}".encode()) for i in range(10)]
    sub = f"{T}/subs/subscription"
    ok(broker, "PUT", f"{sub}/ops", "earliest")
    ok(broker, "PUT", f"{sub}/tail")  # latest: no backlog
    refused(broker, "PUT", f"{sub}/ops", 409, reason="already exists")
    refused(broker, "PUT", f"{sub}/other", 400, {"ledgerId": "x", "entryId": 1}, reason="ledgerId")
    assert ok(broker, "GET", f"{T}/subs/subscriptions") == ["ops", "tail"]
    assert _backlog(broker, "subs", "ops") == 10 and _backlog(broker, "subs", "tail") == 0

    ok(broker, "POST", f"{sub}/ops/skip/3")
    assert _backlog(broker, "subs", "ops") == 7
    refused(broker, "POST", f"{sub}/ops/skip/zero", 400)
    refused(broker, "POST", f"{sub}/ops/skip/0", 400)
    ok(broker, "POST", f"{sub}/ops/resetcursor/0")  # back to the start by publish time
    assert _backlog(broker, "subs", "ops") == 10
    mid = ids[6]
    ok(broker, "POST", f"{sub}/ops/resetcursor", {"ledgerId": mid.ledger_id(), "entryId": mid.entry_id()})
    assert _backlog(broker, "subs", "ops") == 4
    refused(broker, "POST", f"{sub}/ops/resetcursor", 400, raw=b"[", reason="malformed")
    ok(broker, "POST", f"{sub}/ops/expireMessages/3600")  # nothing is that old
    assert _backlog(broker, "subs", "ops") == 4
    time.sleep(0.002)  # publish times are in ms: make "now" strictly later than the last one
    ok(broker, "POST", f"{sub}/ops/expireMessages/0")
    assert _backlog(broker, "subs", "ops") == 0
    ok(broker, "POST", f"{sub}/ops/resetcursor", "earliest")
    assert _backlog(broker, "subs", "ops") == 10
    ok(broker, "POST", f"{sub}/ops/skip_all")
    assert _backlog(broker, "subs", "ops") == 0

    for path in ("skip/1", "skip_all", "expireMessages/1", "resetcursor/0"):
        refused(broker, "POST", f"{sub}/ghost/{path}", 404, reason="Subscription ghost not found")
    refused(broker, "POST", f"{T}/ghost-topic/subscription/ops/skip_all", 404, reason="does not exist")

    consumer = client.subscribe("subs", "busy")
    refused(broker, "DELETE", f"{sub}/busy", 412, reason="active")
    assert "busy" in ok(broker, "GET", f"{T}/subs/subscriptions")
    ok(broker, "DELETE", f"{sub}/busy?force=true")
    ok(broker, "DELETE", f"{sub}/tail")
    refused(broker, "DELETE", f"{sub}/tail", 404)
    assert ok(broker, "GET", f"{T}/subs/subscriptions") == ["ops"]
    consumer.close()
    producer.close()


def test_terminate(broker, client):
    producer = client.create_producer("ending", batching_enabled=False)
    last = [producer.send(f"m{i}".encode()) for i in range(3)][-1]
    answer = ok(broker, "POST", f"{T}/ending/terminate")
    assert (answer["ledgerId"], answer["entryId"]) == (last.ledger_id(), last.entry_id())
    with pytest.raises(Exception, match="TopicTerminated|Terminated"):
        producer.send(b"too late")
    with pytest.raises(Exception, match="TopicTerminated|Terminated"):
        client.create_producer("ending")
    # Consumers still read everything up to the end.
    reader = client.create_reader("ending", pulsar.MessageId.earliest)
    assert [reader.read_next(10_000).data() for _ in range(3)] == [b"m0", b"m1", b"m2"]
    reader.close()
    # It is persisted: still terminated after an unload.
    ok(broker, "PUT", f"{T}/ending/unload")
    assert ok(broker, "GET", f"{T}/ending/internalStats")["state"] == "Terminated"
    assert ok(broker, "POST", f"{T}/ending/terminate") == answer  # idempotent
    refused(broker, "POST", f"{T}/never/terminate", 404)
    ok(broker, "PUT", f"{T}/ending-parted/partitions", 2)
    refused(broker, "POST", f"{T}/ending-parted/terminate", 405, reason="partitioned")


def test_unload_and_topic_deletion_rules(broker, client):
    producer = client.create_producer("unloadable")
    producer.send(b"before")
    ok(broker, "PUT", f"{T}/unloadable/unload")
    producer.send(b"after")  # the client reconnected; the topic was reloaded
    assert ok(broker, "GET", f"{T}/unloadable/stats")["msgInCounter"] >= 1
    refused(broker, "PUT", f"{T}/nowhere/unload", 404)
    refused(broker, "DELETE", f"{T}/unloadable", 412, reason="active")
    producer.close()
    wait_for(lambda: call(broker, "DELETE", f"{T}/unloadable")[0] == 204, what="delete once idle")
    refused(broker, "GET", f"{T}/unloadable/stats", 404)


def test_errors_are_json_everywhere(broker):
    refused(broker, "GET", "no/such/path", 404)
    refused(broker, "PATCH", "tenants", 405)
    spec = ok(broker, "GET", "openapi.json")
    assert spec["openapi"].startswith("3.")
    assert "post" in spec["paths"]["/admin/v2/namespaces/{tenant}/{namespace}/retention"]
