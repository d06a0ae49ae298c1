"""What a replicator forwards, how it stamps it, and how the remote's
deduplication reads the stamp back from the log."""
from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, strategies as st

from magnetar.broker.config import BrokerConfig, ConfigError
from magnetar.broker.namespaces import resources
from magnetar.broker.topics.replicators import (SOURCE_POSITION_PROPERTY, replicated_sequence, replicator_cursor,
                                                source_sequence)
from magnetar.metadata import open_store
from magnetar.protocol import pb
from magnetar.replication.manager import wanted_remotes
from magnetar.replication.replicator import forwardable, stamped


def test_entries_from_another_cluster_and_markers_are_never_forwarded():
    assert forwardable(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), "west")
    assert not forwardable(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                                              replicated_from="east"), "west")
    assert not forwardable(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                                              marker_type=pb.REPLICATED_SUBSCRIPTION_SNAPSHOT), "west")
    assert not forwardable(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                                              marker_type=99), "west")  # unknown: stays


def test_snapshot_requests_responses_and_updates_travel_within_their_replicate_to():
    for kind in (pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST, pb.REPLICATED_SUBSCRIPTION_UPDATE):
        assert forwardable(pb.MessageMetadata(producer_name="m", sequence_id=0, publish_time=1, marker_type=kind),
                           "west")
    response = pb.MessageMetadata(producer_name="m", sequence_id=0, publish_time=1,
                                  marker_type=pb.REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE, replicate_to=["east"])
    assert forwardable(response, "east") and not forwardable(response, "west")


def test_replicate_to_limits_the_remotes():
    md = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1, replicate_to=["east"])
    assert forwardable(md, "east") and not forwardable(md, "west")


@given(st.integers(0, 2**30), st.integers(0, 2**32 - 1), st.integers(0, 2**30), st.integers(0, 2**32 - 1))
def test_the_sent_sequence_grows_with_the_source_position(l1, e1, l2, e2):
    assert ((l1, e1) < (l2, e2)) == (source_sequence(l1, e1) < source_sequence(l2, e2))


def test_a_stamped_entry_gives_back_the_replicators_name_and_sequence():
    md = pb.MessageMetadata(producer_name="orders-1", sequence_id=7, publish_time=1)
    stored = pb.MessageMetadata.FromString(stamped(md, "east", 12, 345))
    assert stored.replicated_from == "east"
    assert stored.producer_name == "orders-1" and stored.sequence_id == 7  # the original's, untouched
    assert any(kv.key == SOURCE_POSITION_PROPERTY and kv.value == "12:345" for kv in stored.properties)
    assert replicated_sequence(stored.replicated_from, stored.properties) == (
        replicator_cursor("east"), source_sequence(12, 345))


def test_a_replicated_entry_without_a_source_position_is_not_taken_for_one():
    assert replicated_sequence("east", [pb.KeyValue(key=SOURCE_POSITION_PROPERTY, value="x:y")]) is None
    assert replicated_sequence("east", []) is None


def test_a_topic_replicates_to_the_other_listed_clusters_only_if_the_local_one_is_listed():
    assert wanted_remotes(["east", "west", "eu"], "east") == {"west", "eu"}
    assert wanted_remotes(["west", "eu"], "east") == set()
    assert wanted_remotes([], "east") == set()


def test_every_broker_adds_its_urls_to_the_cluster_record():
    async def main():
        store = await open_store("memory://")
        await resources.add_cluster_broker(store, "east", {"brokerServiceUrl": "pulsar://h1:6650",
                                                           "serviceUrl": "http://h1:8080"})
        await resources.add_cluster_broker(store, "east", {"brokerServiceUrl": "pulsar://h2:6650",
                                                           "serviceUrl": "http://h2:8080"})
        await resources.add_cluster_broker(store, "east", {"brokerServiceUrl": "pulsar://h1:6650",
                                                           "serviceUrl": "http://h1:8080"})  # again: no change
        record = await resources.get_cluster(store, "east")
        assert record["brokerServiceUrl"] == "pulsar://h1:6650,h2:6650"
        assert resources.broker_urls(record) == ["pulsar://h1:6650", "pulsar://h2:6650"]
        assert resources.broker_urls(record, "serviceUrl") == ["http://h1:8080", "http://h2:8080"]
        await store.close()

    asyncio.run(main())


def test_a_separate_configuration_store_needs_a_cluster_on_etcd():
    with pytest.raises(ConfigError, match="regions are clusters"):
        BrokerConfig(configuration_store_url="etcd://127.0.0.1:2379/global").validate()
    with pytest.raises(ConfigError, match="etcd://HOST:PORT/PREFIX"):
        BrokerConfig(metadata_store_url="etcd://127.0.0.1:2379/east",
                     configuration_store_url="sqlite:///tmp/x.db").validate()
    BrokerConfig(metadata_store_url="etcd://127.0.0.1:2379/east",
                 configuration_store_url="etcd://127.0.0.1:2379/global").validate()
