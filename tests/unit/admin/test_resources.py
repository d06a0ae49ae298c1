"""Admin resources in the metadata store (memory backend)."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.namespaces import resources
from magnetar.broker.topic_name import parse
from magnetar.metadata import MemoryMetadataStore


@pytest.fixture
async def store():
    s = MemoryMetadataStore()
    await resources.bootstrap(s, "standalone", {"serviceUrl": "http://x:8080"})
    yield s
    await s.close()


async def test_bootstrap_is_idempotent_and_refreshes_the_cluster(store):
    await resources.bootstrap(store, "standalone", {"serviceUrl": "http://y:8080"})
    assert await resources.list_clusters(store) == ["standalone"]
    assert (await resources.get_cluster(store, "standalone"))["serviceUrl"] == "http://y:8080"
    assert await resources.list_tenants(store) == ["public"]
    assert await resources.list_namespaces(store, "public") == ["public/default"]
    assert (await resources.get_namespace(store, "public/default"))["replication_clusters"] == ["standalone"]


async def test_tenants(store):
    with pytest.raises(resources.PreconditionFailed):
        await resources.create_tenant(store, "t", {"allowedClusters": ["nope"]})
    with pytest.raises(resources.InvalidInput):
        await resources.create_tenant(store, "t", {"adminRoles": [1]})
    with pytest.raises(resources.InvalidInput):
        await resources.create_tenant(store, "bad/name")
    assert "t" not in await resources.list_tenants(store)
    assert await resources.create_tenant(store, "t") == {"adminRoles": [], "allowedClusters": ["standalone"]}
    with pytest.raises(resources.AlreadyExists):
        await resources.create_tenant(store, "t")
    await resources.create_namespace(store, "t/ns")
    with pytest.raises(resources.NotEmpty):
        await resources.delete_tenant(store, "t")
    await resources.delete_namespace(store, "t/ns")
    await resources.delete_tenant(store, "t")
    with pytest.raises(resources.ResourceNotFound):
        await resources.get_tenant(store, "t")


async def test_namespaces_and_policies(store):
    with pytest.raises(resources.ResourceNotFound):
        await resources.create_namespace(store, "ghost/ns")
    with pytest.raises(resources.InvalidInput):
        await resources.create_namespace(store, "public")
    assert await resources.namespace_policies(store, "public/ghost") == resources.POLICY_FIELDS
    assert not await resources.namespace_exists(store, "a/b/c")
    # Concurrent changes to different policies are all kept (compare-and-set, retried).
    await asyncio.gather(*(resources.set_policy(store, "public/default", field, value) for field, value in [
        ("message_ttl_in_seconds", 60), ("deduplicationEnabled", True), ("replication_clusters", ["standalone"]),
    ]))
    policies = await resources.namespace_policies(store, "public/default")
    assert policies["message_ttl_in_seconds"] == 60 and policies["deduplicationEnabled"] is True
    await resources.set_policy(store, "public/default", "message_ttl_in_seconds", None)
    assert (await resources.get_namespace(store, "public/default"))["message_ttl_in_seconds"] is None
    with pytest.raises(resources.InvalidInput):
        await resources.set_policy(store, "public/default", "nonsense", 1)
    with pytest.raises(resources.ResourceNotFound):
        await resources.set_policy(store, "public/ghost", "message_ttl_in_seconds", 1)


async def test_partitioned_metadata(store):
    name = parse("persistent://public/default/p")
    assert await resources.get_partitions(store, name) == 0
    await resources.create_partitioned(store, name, 2)
    with pytest.raises(resources.AlreadyExists):
        await resources.create_partitioned(store, name, 3)
    with pytest.raises(resources.AlreadyExists, match="more than existing 2"):
        await resources.update_partitions(store, name, 2)
    assert await resources.update_partitions(store, name, 4) == 2
    assert await resources.get_partitions(store, name) == 4
    assert await resources.list_partitioned(store, "public/default") == ["persistent://public/default/p"]
    await resources.delete_partitioned(store, name)
    with pytest.raises(resources.ResourceNotFound):
        await resources.delete_partitioned(store, name)
    assert await resources.list_partitioned(store, "public/default") == []


async def test_a_clustered_brokers_bootstrap_adds_it_to_the_cluster_record(store):
    """Every broker of a cluster bootstraps: each one's URLs join the record,
    none replaces the others' (other regions reach the cluster through any)."""
    await resources.bootstrap(store, "east", {"brokerServiceUrl": "pulsar://h1:6650"}, clustered=True)
    await resources.bootstrap(store, "east", {"brokerServiceUrl": "pulsar://h2:6650",
                                              "brokerServiceUrlTls": "pulsar+ssl://h2:6651"}, clustered=True)
    record = await resources.get_cluster(store, "east")
    assert record["brokerServiceUrl"] == "pulsar://h1:6650,h2:6650"
    assert record["brokerServiceUrlTls"] == "pulsar+ssl://h2:6651"
