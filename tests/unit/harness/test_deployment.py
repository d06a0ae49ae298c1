"""deploy/'s units and templates as the test bed of hosts runs them: the
unit's own ExecStart, its ${VAR}s from the host's environment file, only
the roots of paths moved under the host's directory."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from magnetar_harness import deployment


def test_the_broker_unit_runs_magnetar_broker_on_the_hosts_config(tmp_path):
    argv = deployment.unit_command("magnetar-broker.service", tmp_path)
    assert argv == [str(Path(sys.executable).parent / "magnetar"), "broker", "--config",
                    f"{tmp_path}/etc/magnetar/broker.toml"]


def test_a_seaweedfs_unit_takes_its_values_from_the_hosts_env_file(tmp_path):
    deployment.write_env_file("seaweedfs.env", "/etc/seaweedfs/seaweedfs.env", tmp_path,
                              {"HOST_ADDRESS": "10.9.9.9", "SEAWEED_MASTER": "10.9.9.1:9333"})
    argv = deployment.unit_command("seaweedfs-volume.service", tmp_path)
    assert argv[1] == "volume"
    assert "-ip=10.9.9.9" in argv and "-master=10.9.9.1:9333" in argv
    assert f"-dir={tmp_path}/var/lib/seaweedfs/volume" in argv


def test_a_template_is_rendered_as_envsubst_would_and_its_paths_moved(tmp_path):
    path = deployment.install_template("broker.toml", "/etc/magnetar/broker.toml", tmp_path, {
        "HOST_ADDRESS": "10.9.9.9", "ETCD_ENDPOINTS": "10.9.9.1:2379,10.9.9.2:2379", "CLUSTER_NAME": "c",
        "OBJECT_STORE": "s3://b/c?endpoint=http://10.9.9.5:8333"})
    text = path.read_text()
    assert 'metadata_store_url = "etcd://10.9.9.1:2379,10.9.9.2:2379/c"' in text
    assert f'data_dir = "{tmp_path}/var/lib/magnetar"' in text
    assert "endpoint=http://10.9.9.5:8333" in text


def test_a_variable_the_host_does_not_set_is_named(tmp_path):
    with pytest.raises(deployment.DeploymentError, match="needs the variable (CLUSTER_NAME|ETCD_ENDPOINTS|OBJECT_STORE)"):
        deployment.install_template("broker.toml", "/etc/magnetar/broker.toml", tmp_path, {"HOST_ADDRESS": "x"})


def test_every_unit_of_deploy_has_a_command():
    for unit in sorted(deployment.DEPLOY_DIR.glob("*.service")):
        command, _ = deployment.exec_start(unit.name)
        assert command.split()[0].startswith(deployment.BINARY_ROOTS), unit.name


def test_override_toml_replaces_a_key_in_place_or_adds_it_to_its_table(tmp_path):
    from magnetar_harness.deployment import DeploymentError, override_toml

    path = tmp_path / "broker.toml"
    path.write_text('cluster_session_ttl_s = 10.0\nport = 6650\n\n[storage]\nbackend = "object"\n')
    override_toml(path, {"cluster_session_ttl_s": "4.0", "storage.max_entries_per_ledger": "2000"})
    import tomllib

    config = tomllib.loads(path.read_text())
    assert config["cluster_session_ttl_s"] == 4.0 and config["port"] == 6650
    assert config["storage"] == {"backend": "object", "max_entries_per_ledger": 2000}
    with pytest.raises(DeploymentError, match=r"\[metadata\]"):
        override_toml(path, {"metadata.x": "1"})
