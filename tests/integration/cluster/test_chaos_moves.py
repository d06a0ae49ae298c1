"""Short chaos runs on a cluster with bundle moves: ``--faults move`` (at
least one bundle holding a workload topic moved between brokers while the
clients worked), and moves whose source died (``move-kill-source``), froze
past its session (``move-pause-source``) or was cut off past it
(``move-partition-source``, root) mid-handover, and splits whose owner
died (``split-kill``), every bundle owned again; the checker finds nothing
wrong."""
from __future__ import annotations

import pytest

from magnetar_chaos.history import read_history
from magnetar_chaos.netns import unavailable_reason
from magnetar_chaos.runner import run

pytestmark = pytest.mark.timeout(240)


def _run(tmp_path, fault: str, seed: int):
    """20 s of ``fault`` on a cluster, one every 1-2 s after the previous
    heal; the report and the nemesis's heal lines."""
    report = run(tmp_path, duration=20, faults=[fault], seed=seed, topology="cluster", interval=(1.0, 2.0))
    heals = [op["value"] for op in read_history(tmp_path / "history.jsonl")
             if op.get("f") == "heal" and op.get("process") == "nemesis"]
    return report, heals


def _assert_owned_after(heals: list[str], struck: str) -> None:
    """Some heal line says ``struck`` ("source killed", "owner killed", ...)
    and that the bundle was owned again; no bundle was ever left without an
    owner."""
    hit = [h for h in heals if struck in h]
    assert hit and any("owned by" in h for h in hit), heals
    assert not [h for h in heals if "STUCK" in h], heals


def test_a_chaos_run_with_bundle_moves_is_clean(tmp_path):
    report, heals = _run(tmp_path, "move", seed=3)  # five or more moves in 20 s
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
    report, heals = _run(tmp_path, "move-kill-source", seed=5)
    _assert_owned_after(heals, "source killed")
    assert report.acknowledged > 0
    assert report.clean, report.examples


def test_a_chaos_run_whose_moves_freeze_their_source_is_clean(tmp_path):
    """``move-pause-source``: the owner is SIGSTOPped 0-60 ms after the unload
    is asked and held past its 3 s session, so the leader passes the bundle
    on while the source still holds its clients' connections and believes
    it is mid-handover. When it wakes, a zombie, nothing it stores or
    acknowledges may count: the checker finds no phantom, duplicate or
    interleaved writer, no stale read, and the bundle has an owner again."""
    report, heals = _run(tmp_path, "move-pause-source", seed=5)
    _assert_owned_after(heals, "source paused")
    # The next-offset reads, some of them asked of the source as it woke:
    # none may miss a receipt the new owner gave before it was asked.
    assert report.acknowledged > 0 and report.offset_reads > 0 and report.stale_reads == 0
    assert report.clean, report.examples


def test_a_chaos_run_whose_splits_lose_their_owner_is_clean(tmp_path):
    """``split-kill``: the owner of a workload topic's bundle is SIGKILLed
    0-60 ms after a split of it is asked (the owner does the split) and
    restarted 0.5-2 s later. Whether the split happened or not, the bundle
    now holding the topic is owned again, and nothing acknowledged is lost."""
    report, heals = _run(tmp_path, "split-kill", seed=12)
    _assert_owned_after(heals, "owner killed")
    assert report.acknowledged > 0
    assert report.clean, report.examples


@pytest.mark.skipif(unavailable_reason() is not None, reason=str(unavailable_reason()))
def test_a_chaos_run_whose_moves_cut_their_source_off_is_clean(tmp_path):
    """``move-partition-source`` (root: network namespaces): the owner is cut
    from etcd and the other brokers 0-60 ms after the unload is asked, past
    its session, while its clients still reach it: a zombie by the network.
    The bundle is owned again and the checker finds nothing wrong."""
    report, heals = _run(tmp_path, "move-partition-source", seed=11)
    _assert_owned_after(heals, "source partitioned")
    assert report.acknowledged > 0
    assert report.clean, report.examples
