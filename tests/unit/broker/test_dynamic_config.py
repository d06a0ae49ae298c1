"""Dynamic settings: checked, stored once for the cluster, applied by every broker's watch."""
from __future__ import annotations

import json

import pytest

from magnetar.broker.config import BrokerConfig
from magnetar.broker.dynamic_config import PATH, DynamicConfig, DynamicConfigError, canonical, parse_value
from magnetar.formats import NewerFormatError
from magnetar.metadata import MemoryMetadataStore
from tests.helpers import wait_until


def test_names_pulsars_accepted_static_ones_need_a_restart():
    assert canonical("dispatchThrottlingRatePerTopicInMsg") == "dispatch_throttling_rate_per_topic_in_msg"
    assert canonical("load_balancer_load_threshold") == "load_balancer_load_threshold"
    with pytest.raises(DynamicConfigError, match="max_message_size needs a restart"):
        canonical("max_message_size")
    with pytest.raises(DynamicConfigError, match="unknown setting 'nope'"):
        canonical("nope")


def test_values_take_the_settings_type_and_its_checks():
    base = BrokerConfig()
    assert parse_value("allow_auto_topic_creation", "False", base) is False
    assert parse_value("dispatcher_max_read_batch", "7", base) == 7
    assert parse_value("load_balancer_load_threshold", "0.2", base) == 0.2
    with pytest.raises(DynamicConfigError, match="takes int"):
        parse_value("dispatcher_max_read_batch", "many", base)
    with pytest.raises(DynamicConfigError, match="load_balancer_load_threshold"):
        parse_value("load_balancer_load_threshold", "3", base)  # the config's own range check


async def test_an_update_reaches_every_broker_and_a_delete_brings_the_files_value_back():
    store = await MemoryMetadataStore.open()
    try:
        a_config, b_config = BrokerConfig(), BrokerConfig(dispatcher_max_read_batch=50)
        applied: list[set] = []
        a, b = DynamicConfig(store, a_config), DynamicConfig(store, b_config, applied.append)
        for d in (a, b):
            await d.load()
            d.start_watch()
        await a.update("dispatcherMaxReadBatchSize", "9")
        assert a_config.dispatcher_max_read_batch == 9
        await wait_until(lambda: b_config.dispatcher_max_read_batch == 9, what="the other broker applied it")
        assert {"dispatcher_max_read_batch"} in applied
        await b.update("allow_auto_topic_creation", "false")
        await wait_until(lambda: a_config.allow_auto_topic_creation is False)
        assert a.overrides == {"dispatcher_max_read_batch": 9, "allow_auto_topic_creation": False}
        await a.delete("dispatcher_max_read_batch")
        await wait_until(lambda: b_config.dispatcher_max_read_batch == 50, what="b's file value back")
        assert a_config.dispatcher_max_read_batch == 100
        with pytest.raises(DynamicConfigError, match="no dynamic value"):
            await a.delete("dispatcher_max_read_batch")
        with pytest.raises(DynamicConfigError, match="needs a restart"):
            await a.update("port", "1")
        # A broker started later applies what is stored before it serves.
        late = BrokerConfig()
        assert await DynamicConfig(store, late).load() == {"allow_auto_topic_creation"}
        assert late.allow_auto_topic_creation is False
        for d in (a, b):
            d.close()
    finally:
        await store.close()


async def test_a_record_without_a_format_is_format_1_and_a_newer_one_is_refused():
    store = await MemoryMetadataStore.open()
    try:
        await store.put(PATH, json.dumps({"values": {"dispatcher_max_read_batch": 3}}).encode())
        config = BrokerConfig()
        await DynamicConfig(store, config).load()
        assert config.dispatcher_max_read_batch == 3
        record = await store.get(PATH)
        await store.put(PATH, json.dumps({"format": 2, "values": {}}).encode(), expected_version=record.version)
        with pytest.raises(NewerFormatError, match="format 2, newer than this Magnetar reads"):
            await DynamicConfig(store, BrokerConfig()).load()
    finally:
        await store.close()
