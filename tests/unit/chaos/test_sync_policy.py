"""``magnetar-chaos run --sync-policy``: the brokers' TOML file carries the
policy under the key the broker reads, and anything but ``always`` or
``interval`` is refused before anything starts."""
import pytest

from magnetar.broker.config import load_config
from magnetar_chaos.regions import RegionsSystem
from magnetar_chaos.systems import LEDGER_ENTRIES, ClusterSystem, StandaloneSystem, _broker_config


@pytest.mark.parametrize("policy", ["always", "interval"])
def test_the_brokers_config_file_gives_them_the_policy(tmp_path, policy):
    config = load_config(_broker_config(tmp_path, policy))
    assert config.storage.sync_policy == policy
    assert config.storage.max_entries_per_ledger == LEDGER_ENTRIES


@pytest.mark.parametrize("system", [StandaloneSystem, ClusterSystem, RegionsSystem])
def test_an_unknown_policy_is_refused_before_anything_starts(tmp_path, system):
    with pytest.raises(ValueError, match="sync policy 'never' is not available"):
        system(tmp_path / "run", sync_policy="never")
    assert not (tmp_path / "run").exists()
