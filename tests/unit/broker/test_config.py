"""Configuration: the example file documents every setting; bad values are refused."""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from magnetar.broker.config import BrokerConfig, ConfigError, load_config
from magnetar.storage.config import StorageConfig

EXAMPLE = Path(__file__).resolve().parents[3] / "magnetar.example.toml"


def test_example_file_lists_every_setting_with_its_default():
    data = tomllib.loads(EXAMPLE.read_text())
    broker_fields = {f.name for f in dataclasses.fields(BrokerConfig)} - {"storage"}
    storage_fields = {f.name for f in dataclasses.fields(StorageConfig)}
    assert set(data) - {"storage"} == broker_fields
    assert set(data["storage"]) == storage_fields
    loaded = load_config(EXAMPLE)
    assert loaded == BrokerConfig()


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('port = 7000\n[storage]\nsync_policy = "interval"\n')
    cfg = load_config(path, {"port": 7100, "admin_port": None})
    assert cfg.port == 7100
    assert cfg.admin_port == 8080
    assert cfg.storage.sync_policy == "interval"


@pytest.mark.parametrize(
    "text,match",
    [
        ("prot = 1", "unknown setting 'prot'"),
        ('port = "x"', "port must be int"),
        ("port = 70000", "port must be"),
        ('[storage]\nsync_policy = "sometimes"', "sync_policy"),
        ("port = ", "not valid TOML"),
        ("lookup_timeout_s = 0.0", "lookup_timeout_s must be more than 0 and at most 30 s"),
        ("lookup_timeout_s = 45.0", "lookup_timeout_s must be more than 0 and at most 30 s"),
    ],
)
def test_bad_settings_are_refused_clearly(tmp_path, text, match):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    "text,said",
    [
        ('sync_policy = "always"', "unknown setting 'sync_policy': sync_policy belongs under [storage], not the "
                                   "top level"),
        ("[storage]\nport = 1", "unknown setting 'storage.port': port belongs under the top level, not [storage]"),
        ("prot = 1", "unknown setting 'prot': did you mean port?"),
        ("[storage]\nsync_polcy = 'always'", "unknown setting 'storage.sync_polcy': did you mean sync_policy?"),
        ("zzzz = 1", "unknown setting 'zzzz': the settings are listed in magnetar.example.toml"),
    ],
)
def test_an_unknown_setting_is_one_line_naming_its_section_or_the_nearest_name(tmp_path, text, said):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value) == said
