"""The [storage] settings of ledgers on object storage: defaults, what is
accepted, one clear line for what is not."""
from __future__ import annotations

import pytest

from magnetar.broker.config import ConfigError, load_config
from magnetar.storage.config import StorageConfig

ETCD = {"metadata_store_url": "etcd://127.0.0.1:2379/c"}
URL = "s3://bucket/prefix?endpoint=http://127.0.0.1:8333"


def test_file_is_the_default_and_needs_nothing():
    config = StorageConfig()
    assert (config.backend, config.object_store_url) == ("file", "")
    assert config.object_commit_interval_ms == 250 and config.object_commit_max_bytes == 8 * 1024 * 1024
    assert config.object_storage_profile == "latency" and config.object_put_budget_per_s == 250
    assert config.object_put_budget_floor_per_s == 25


@pytest.mark.parametrize("sections", [9, 0, -1000, 100_001, 50.5, True, "100"])
def test_sections_per_ledger_out_of_bounds_or_not_an_integer_is_one_clear_error(sections):
    with pytest.raises(ValueError, match=r"^object_sections_per_ledger must be an integer from 10 to 100000; got "):
        StorageConfig(object_sections_per_ledger=sections)
    assert StorageConfig(object_sections_per_ledger=10).object_sections_per_ledger == 10  # the bounds are in
    assert StorageConfig(object_sections_per_ledger=100_000).object_sections_per_ledger == 100_000


def test_a_storage_profile_not_known_is_one_clear_error():
    with pytest.raises(ValueError, match="object_storage_profile must be one of latency, cost; got 'fast'"):
        StorageConfig(object_storage_profile="fast")
    with pytest.raises(ValueError, match="object_put_budget_per_s must be >= 0"):
        StorageConfig(object_put_budget_per_s=-1)


def test_an_object_backend_on_a_cluster(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(f'[storage]\nbackend = "object"\nobject_store_url = "{URL}"\nobject_commit_interval_ms = 50\n')
    config = load_config(path, ETCD)
    assert config.storage.backend == "object" and config.storage.object_store_url == URL
    assert config.storage.object_commit_interval_ms == 50
    assert config.storage.object_sections_per_ledger == 1000  # the default


async def test_sections_per_ledger_reach_the_object_backend_a_broker_opens(tmp_path):
    from magnetar.storage.factory import open_factory
    path = tmp_path / "c.toml"
    path.write_text(f'[storage]\nbackend = "object"\nobject_store_url = "{URL}"\nobject_sections_per_ledger = 50\n'
                    'object_collect_interval_s = 42.5\nobject_put_budget_per_s = 100\n'
                    'object_put_budget_floor_per_s = 10\n')
    config = load_config(path, ETCD)
    assert config.storage.object_sections_per_ledger == 50
    assert StorageConfig().object_collect_interval_s == 300  # the default
    factory = await open_factory(tmp_path, None, config.storage)  # no request made: nothing to close but the client
    try:
        assert factory.backend.sections_per_ledger == 50
        assert factory.backend._collect_interval_s == 42.5
        pacer = factory.backend.committer.pacer
        assert pacer is not None and pacer.active and (pacer.floor, pacer.ceiling) == (10, 100)
    finally:
        await factory.backend.objects.close()


@pytest.mark.parametrize(
    ("storage", "says"),
    [
        ({"backend": "disk"}, "backend must be one of file, object"),
        ({"backend": "object"}, "needs object_store_url"),
        ({"backend": "object", "object_store_url": "http://bucket"}, "must start with s3://"),
        ({"backend": "object", "object_store_url": "s3://B"}, "not a valid bucket name"),
        ({"object_commit_interval_ms": 0}, "object_commit_interval_ms must be > 0"),
        ({"object_commit_max_bytes": 6 * 1024**3}, "S3's largest PUT"),
        ({"object_sections_per_ledger": 9}, "object_sections_per_ledger must be an integer from 10 to 100000; got 9"),
        ({"object_sections_per_ledger": 100_001}, "object_sections_per_ledger must be an integer from 10 to 100000"),
        ({"object_collect_interval_s": 0}, "object_collect_interval_s must be > 0; got 0"),
        ({"object_put_budget_floor_per_s": -5}, "object_put_budget_floor_per_s must be >= 0"),
    ],
)
def test_bad_storage_settings_are_one_clear_line(storage, says):
    with pytest.raises(ConfigError) as error:
        load_config(None, {**ETCD, "storage": storage})
    assert says in str(error.value) and str(error.value).startswith("[storage]")
    assert "\n" not in str(error.value)


def test_standalone_keeps_files():
    with pytest.raises(ConfigError, match='backend = "object" needs a cluster'):
        load_config(None, {"storage": {"backend": "object", "object_store_url": URL}})
