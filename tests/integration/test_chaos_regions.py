"""The ``regions`` topology of the chaos harness (magnetar_chaos/regions.py)
with real brokers and etcd: the link proxy really is the only way from
region A to region B (held down, A's replicator loses B and its backlog
grows; healed, B gets everything once); a short run with broker
faults and cuts finds no anomaly, with faults injected, every topic
replicated, what region B acknowledged in A's log, and the replicated
subscriptions' copies in B looked up; and a consumer failing over between
the regions resumes from its subscription's copy."""
from __future__ import annotations

import json
import subprocess
import sys

from magnetar import client as magnetar_client
from magnetar_chaos.regions import REGIONS, RegionsSystem
from magnetar_chaos.workloads import read_log

from tests.helpers import wait_for


def _replication(system: RegionsSystem, topic: str) -> dict:
    """A's stats entry for its replicator to B ({} until there is one)."""
    path = "/admin/v2/" + topic.replace("://", "/", 1) + "/stats"
    from magnetar_chaos.regions import _admin

    try:
        return (_admin(system.admin_url, path) or {}).get("replication", {}).get(REGIONS[1], {})
    except OSError:
        return {}


def test_the_link_down_holds_replication_back_and_the_heal_delivers_it_once(tmp_path):
    topic = "persistent://public/default/link-check"
    system = RegionsSystem(tmp_path)
    client = None
    try:
        system.start()
        client = magnetar_client.Client(system.service_url, operation_timeout_seconds=15)
        producer = client.create_producer(topic)
        producer.send(b"before")
        wait_for(lambda: system.replication_backlog(topic) == 0, timeout=30, what="the first message replicated")
        system.link.down = True
        try:
            system.link.cut()
            wait_for(lambda: _replication(system, topic).get("connected") is False, timeout=30,
                     what="A's replicator to lose B")
            producer.send(b"during")
            wait_for(lambda: (system.replication_backlog(topic) or 0) >= 1, timeout=10,
                     what="the message held back while the link is down")
        finally:
            system.link.down = False
        wait_for(lambda: system.replication_backlog(topic) == 0, timeout=60, what="replication after the heal")
        assert [v for _, v in read_log(system.replica_service_url, topic)] == ["before", "during"]
    finally:
        if client is not None:
            client.close()
        system.stop()


def _clean_run(tmp_path, duration: int, faults: str, seed: int) -> tuple[dict, list[dict]]:
    """``magnetar-chaos run --topology regions`` with a fault every 1-2 s;
    its report and history, once it exited 0 with a clean verdict."""
    out = tmp_path / "chaos"
    result = subprocess.run(
        [sys.executable, "-m", "magnetar_chaos", "run", "--topology", "regions", "--duration", str(duration),
         "--interval", "1,2", "--faults", faults, "--seed", str(seed), "--out", str(out)],
        capture_output=True, text=True, timeout=240 + 4 * duration)
    run_dir = out / f"seed-{seed}"
    report = json.loads((run_dir / "report.json").read_text())
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert report["clean"], report
    return report, [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def test_a_short_run_with_broker_faults_and_cuts_replicates_everything(tmp_path):
    """~15 s of the workloads in region A with kill, pause and cut every 1-2 s."""
    report, ops = _clean_run(tmp_path, 15, "kill,pause,cut", seed=3)
    assert sum(report["faults"].values()) >= 3, report["faults"]
    replicas = [op for op in ops if op["f"] == "replica-read" and op["type"] == "ok"]
    topics = {op["topic"] for op in ops if op["f"] == "read" and op["type"] == "ok"}
    assert {op["topic"] for op in replicas} == topics and len(topics) == 5
    assert all(op["caught_up"] for op in replicas), [(op["topic"], op["waited_s"]) for op in replicas]
    assert report["replicated"] >= report["acknowledged"] > 0
    # Both regions wrote the dedup topic at once: what B acknowledged is in
    # A's log too (else the checker would have called it lost).
    from_b = [op["value"] for op in ops if op["f"] == "send" and op["type"] == "ok" and op["process"] == "dedup-b"]
    dedup_log = next(op["log"] for op in ops if op["f"] == "read" and op["type"] == "ok" and op["topic"].endswith("-dedup"))
    assert from_b and set(from_b) <= {value for _, value in dedup_log}
    # The replicated subscription's copy in B was looked up (judged if B has one).
    assert [op["subscription"] for op in ops if op["f"] == "replica-subscription"] == ["chaos-replicated",
                                                                                      "chaos-following"]


def test_a_consumer_that_fails_over_between_the_regions_misses_nothing(tmp_path):
    """``failover``: the following consumer (a replicated subscription)
    moves from A to B and back, subscribing from Latest each time, while
    the workloads write into A and the link is cut now and then. Only the
    subscription's replicated copy in B makes that lossless: without it,
    the consumer would start at B's end and the checker would report the
    messages between as missed by consumers."""
    _, ops = _clean_run(tmp_path, 25, "failover,cut", seed=4)
    heals = [op["value"] for op in ops if op["f"] == "heal"]
    assert any(h.startswith("failover region-a -> region-b: subscribed") for h in heals), heals
    assert _resumed_behind_the_end_in_b(ops), heals


def _resumed_behind_the_end_in_b(ops: list[dict]) -> bool:
    """Whether, after some subscription of the following consumer in region
    B, it received a message again or one sent before it subscribed there:
    it resumed from the replicated copy's position, not from B's end."""
    invoked = {op["value"]: i for i, op in enumerate(ops) if op["f"] == "send" and op["type"] == "invoke"}
    seen: set[str] = set()
    region, subscribed_at, behind = None, 0, False
    for i, op in enumerate(ops):
        if op["f"] == "subscribed" and op.get("subscription") == "chaos-following":
            region, subscribed_at = op["region"], i
        elif op["f"] == "receive" and op.get("subscription") == "chaos-following":
            if region == "region-b" and (op["value"] in seen or invoked.get(op["value"], i) < subscribed_at):
                behind = True
            seen.add(op["value"])
    return behind
