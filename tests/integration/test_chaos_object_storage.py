"""A short chaos run of a cluster on object storage (``magnetar-chaos run
--topology cluster --storage object``): its own SeaweedFS is killed and
paused, and a broker is killed and its data directory deleted; nothing
acknowledged may be lost, duplicated or read stale."""
from __future__ import annotations

import json

import pytest

from magnetar_chaos.netns import unavailable_reason as netns_unavailable
from magnetar_chaos.runner import run

pytestmark = pytest.mark.timeout(300)


def test_a_chaos_run_on_object_storage_is_clean(tmp_path):
    report = run(tmp_path, duration=25, faults=["kill-objectstore", "pause-objectstore", "kill-wipe"], seed=27,
                 topology="cluster", interval=(1.0, 2.0), storage="object")
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["storage"] == "object"
    assert 'backend = "object"' in (tmp_path / "cluster" / "chaos-broker.toml").read_text()
    assert (tmp_path / "cluster" / "objectstore" / "data").is_dir()
    assert sum(report.faults.values()) >= 3, report.faults
    assert {"kill-objectstore", "pause-objectstore", "kill-wipe"} <= set(report.faults), report.faults
    assert report.acknowledged > 0
    assert report.clean, report.examples


@pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))
def test_a_broker_cut_from_the_object_store_only_loses_nothing(tmp_path):
    """Root only (network namespaces): a broker that keeps etcd, its peers
    and its clients but cannot reach the object store for 2-12 s."""
    report = run(tmp_path, duration=20, faults=["cut-objectstore", "kill-wipe"], seed=25, topology="cluster",
                 interval=(1.0, 2.0), storage="object")
    assert report.faults["cut-objectstore"] >= 1 and report.faults["kill-wipe"] >= 1, report.faults
    assert report.acknowledged > 0
    assert report.clean, report.examples
