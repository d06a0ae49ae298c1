"""``magnetar-chaos run --storage object``: the brokers' TOML file points
them at the object store, and object store faults without it (or on a
topology that keeps files) are refused before anything starts."""
import pytest

from magnetar.broker.config import load_config
from magnetar_chaos.netns import PartitionUnavailable
from magnetar_chaos.netns import unavailable_reason as netns_unavailable
from magnetar_chaos.objectstore import OBJECT_ONLY_FAULTS
from magnetar_chaos.runner import run
from magnetar_chaos.systems import ClusterSystem, _broker_config

URL = "s3://magnetar-chaos/chaos?endpoint=http://127.0.0.1:8333"


def test_the_brokers_config_file_points_them_at_the_object_store(tmp_path):
    config = load_config(_broker_config(tmp_path, "always", URL), {"metadata_store_url": "etcd://127.0.0.1:2379/c"})
    assert config.storage.backend == "object" and config.storage.object_store_url == URL
    assert load_config(_broker_config(tmp_path / "f")).storage.backend == "file"


@pytest.mark.parametrize("fault", OBJECT_ONLY_FAULTS)
def test_object_store_faults_need_object_storage(tmp_path, fault):
    with pytest.raises(ValueError, match=f"{fault} need --storage object"):
        ClusterSystem(tmp_path / "run", faults=[fault])
    assert not (tmp_path / "run").exists()
    if fault == "cut-objectstore" and netns_unavailable() is not None:
        with pytest.raises(PartitionUnavailable):  # network namespaces: root only
            ClusterSystem(tmp_path / "run", faults=[fault], storage="object")
    else:
        ClusterSystem(tmp_path / "run", faults=[fault], storage="object")  # accepted; nothing started


def test_unknown_storage_and_a_topology_without_it_are_refused(tmp_path):
    with pytest.raises(ValueError, match="storage 'tape' is not available"):
        ClusterSystem(tmp_path / "run", storage="tape")
    with pytest.raises(ValueError, match="--storage object needs --topology cluster"):
        run(tmp_path / "run", 1, ["kill"], 1, "standalone", storage="object")
    assert not (tmp_path / "run").exists()
