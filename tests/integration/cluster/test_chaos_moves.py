"""Short chaos runs on a cluster with bundle moves: ``--faults move`` (at
least one bundle holding a workload topic moved between brokers while the
clients worked) and ``--faults move-kill-source`` (moves whose source died
mid-handover, every bundle owned again); the checker finds nothing wrong."""
from __future__ import annotations

import pytest

from magnetar.chaos.history import read_history
from magnetar.chaos.netns import unavailable_reason
from magnetar.chaos.runner import run

pytestmark = pytest.mark.timeout(240)


def test_a_chaos_run_with_bundle_moves_is_clean(tmp_path):
    # One fault every 1-2 s after the previous heal: five or more in 20 s.
    report = run(tmp_path, duration=20, faults=["move"], seed=3, topology="cluster", interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    moved = [h for h in heals if " -> " in h and ":" not in h]  # a refusal reads "move ...: refused (...)"
    assert report.faults["move"] >= 1 and moved, heals
    assert report.acknowledged > 0
    assert report.clean, report.examples


def test_a_chaos_run_whose_moves_lose_their_source_is_clean(tmp_path):
    """``move-kill-source``: the owner is SIGKILLed 0-60 ms after the unload
    is asked and restarted within its session. Every bundle must be owned
    again (the heal line says by whom; ``STUCK`` if it had no owner for
    20 s, which is what a source back within its session left before the
    fix in ``ClusterMember._join``), and nothing acknowledged lost."""
    report = run(tmp_path, duration=20, faults=["move-kill-source"], seed=5, topology="cluster",
                 interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    killed = [h for h in heals if "source killed" in h]
    assert killed and any("owned by" in h for h in killed), heals
    assert not [h for h in heals if "STUCK" in h], heals
    assert report.acknowledged > 0
    assert report.clean, report.examples


def test_a_chaos_run_whose_moves_freeze_their_source_is_clean(tmp_path):
    """``move-pause-source``: the owner is SIGSTOPped 0-60 ms after the unload
    is asked and held past its 3 s session, so the leader passes the bundle
    on while the source still holds its clients' connections and believes
    it is mid-handover. When it wakes, a zombie, nothing it stores or
    acknowledges may count: the checker finds no phantom, duplicate or
    interleaved writer, no stale read, and the bundle has an owner again."""
    report = run(tmp_path, duration=20, faults=["move-pause-source"], seed=5, topology="cluster",
                 interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    paused = [h for h in heals if "source paused" in h]
    assert paused and any("owned by" in h for h in paused), heals
    assert not [h for h in heals if "STUCK" in h], heals
    # The next-offset reads, some of them asked of the source as it woke:
    # none may miss a receipt the new owner gave before it was asked.
    assert report.acknowledged > 0 and report.offset_reads > 0 and report.stale_reads == 0
    assert report.clean, report.examples


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_a_chaos_run_whose_moves_cut_their_source_off_is_clean(tmp_path):
    """``move-partition-source`` (root: network namespaces): the owner is cut
    from etcd and the other brokers 0-60 ms after the unload is asked, past
    its session, while its clients still reach it: a zombie by the network.
    The bundle is owned again and the checker finds nothing wrong."""
    report = run(tmp_path, duration=20, faults=["move-partition-source"], seed=11, topology="cluster",
                 interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    cut = [h for h in heals if "source partitioned" in h]
    assert cut and any("owned by" in h for h in cut), heals
    assert not [h for h in heals if "STUCK" in h], heals
    assert report.acknowledged > 0
    assert report.clean, report.examples
