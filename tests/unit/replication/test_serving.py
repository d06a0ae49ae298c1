"""Which namespaces a region serves (Pulsar's rule: only those replicated to
it), and how regions join ``public/default`` at start."""
from __future__ import annotations

import asyncio

import pytest

from magnetar.broker.errors import NotServedHere
from magnetar.broker.namespaces import resources
from magnetar.broker.namespaces.serving import check_served_here
from magnetar.broker.topic_name import parse
from magnetar.metadata import open_store


async def _store_with(namespaces: dict[str, list[str]]):
    store = await open_store("memory://")
    for cluster in ("east", "west", "eu"):
        await resources.ensure_cluster(store, cluster, {})
    await resources.create_tenant(store, "acme", {"allowedClusters": ["east", "west", "eu"]})
    for namespace, clusters in namespaces.items():
        await resources.create_namespace(store, namespace, {"replication_clusters": clusters})
    return store


def test_a_region_serves_only_the_namespaces_replicated_to_it():
    async def main():
        store = await _store_with({"acme/pair": ["east", "west"], "acme/none": []})
        pair = parse("persistent://acme/pair/t")
        await check_served_here(store, pair, "east")
        with pytest.raises(NotServedHere, match="acme/pair is not served in cluster eu.*east, west"):
            await check_served_here(store, pair, "eu")
        with pytest.raises(NotServedHere):  # a partition follows its topic
            await check_served_here(store, parse("persistent://acme/pair/t-partition-2"), "eu")
        # No list at all (or no namespace): served everywhere, as before.
        await check_served_here(store, parse("persistent://acme/none/t"), "eu")
        await check_served_here(store, parse("persistent://acme/missing/t"), "eu")
        # A topic's own list replaces the namespace's.
        await resources.set_topic_replication_clusters(store, pair, ["east", "eu"])
        await check_served_here(store, pair, "eu")
        with pytest.raises(NotServedHere):
            await check_served_here(store, pair, "west")
        await check_served_here(store, parse("persistent://acme/pair/other"), "west")
        await store.close()

    asyncio.run(main())


def test_regions_join_public_default_and_a_standalone_broker_does_not():
    async def main():
        store = await open_store("memory://")
        await resources.bootstrap(store, "east", {}, region=True)
        await resources.bootstrap(store, "west", {}, region=True)
        await resources.bootstrap(store, "west", {}, region=True)  # a restart changes nothing
        assert (await resources.get_tenant(store, "public"))["allowedClusters"] == ["east", "west"]
        assert (await resources.get_namespace(store, "public/default"))["replication_clusters"] == ["east", "west"]
        await store.close()

        alone = await open_store("memory://")
        await resources.bootstrap(alone, "standalone", {})
        await resources.bootstrap(alone, "renamed", {})
        assert (await resources.get_namespace(alone, "public/default"))["replication_clusters"] == ["standalone"]
        await alone.close()

    asyncio.run(main())
