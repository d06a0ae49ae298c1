"""The deployment of docs/deploy.md on a test bed of hosts (network namespaces
on a bridge, magnetar_harness/hosts.py): 3 brokers on object storage, a
3-member etcd, SeaweedFS split over 5 hosts, a client host and a Spark
standalone cluster, every part started with deploy/'s unit and config. The
official client runs on the client host and reaches the brokers only by
their addresses. Faults are between hosts: cuts (one-way or both), a host
isolated, a host lost with its disk.

Root only (network namespaces); not root is a failure with one line saying
so, never a skip: CI runs as root. The tests share one deployment and run
in order; each leaves it whole again (healed, lost parts restarted)."""
from __future__ import annotations

import json
import shutil
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from magnetar_harness.host_topology import (BROKERS, CLIENT, CLUSTER_NAME, ETCDS, SPARK_WORKERS, WEED_S3, WEED_VOLUMES,
                                            default_base, host_topology)
from magnetar_harness.hosts import unavailable_reason
from magnetar_harness.waiting import wait_for
from tests.helpers import unique

from .support import (TOPIC_PREFIX, assert_exactly_once, consume_all, etcd_leader, etcd_status, get_json, owner,
                      start_producer)

TAG = "htest"
SESSION_TTL_S = 10.0  # deploy/broker.toml's cluster_session_ttl_s


@pytest.fixture(scope="module")
def topo():
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the host tests cannot run here: {reason}", pytrace=False)
    topology = host_topology(TAG, default_base(TAG))
    try:
        topology.start(spark=True)
        yield topology
    finally:
        topology.stop()


@pytest.fixture(autouse=True)
def whole_again(topo):
    """After each test: every cut healed, every part back."""
    yield
    topo.bed.heal()
    for proc in list(topo.bed.processes):
        if proc.name.startswith("producer-") and proc.alive:
            proc.kill()
    for host in ETCDS:
        if not any(p.alive for p in topo.bed.on(host)):
            topo.start_etcd(host)
    for host in ETCDS:
        topo.wait_etcd(host)
    for host in BROKERS:
        if not topo.broker_ready(host):
            topo.restart_broker(host)


def _topic_owned_by(topo, broker: str, stem: str) -> str:
    """A new topic whose bundle ``broker`` owns (names tried until one falls there)."""
    for _ in range(200):
        topic = unique(stem)
        if owner(topo, topic) == broker:
            return topic
    raise AssertionError(f"no topic of 200 fell on {broker}")


def _log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_the_parts_run_on_their_own_hosts_with_the_deployments_commands(topo):
    # Each part listens on its host's address only; the brokers' config came from deploy/.
    for part in topo.parts:
        assert part.process.alive, f"{part.role}: {part.process.log_tail()}"
        assert topo.bed.namespace(part.host) in part.process.popen.args
    config = (topo.root("broker-1") / "etc" / "magnetar" / "broker.toml").read_text()
    assert f'advertised_address = "{topo.address("broker-1")}"' in config
    assert f"etcd://{topo.etcd_endpoints}/" in config
    members = get_json(f"http://{topo.address('etcd-1')}:2379/v3/cluster/member/list", method="POST", body=b"{}")
    assert len(members["members"]) == 3
    # The brokers know each other by their hosts' addresses, never loopback.
    brokers = get_json(f"{topo.admin_url('broker-2')}/admin/v2/brokers/{CLUSTER_NAME}")
    assert sorted(brokers) == sorted(f"{topo.address(h)}:8080" for h in BROKERS), brokers


def test_produce_through_every_broker_and_consume_over_tls(topo):
    topics = [_topic_owned_by(topo, broker, "every") for broker in BROKERS]
    producers = [start_producer(topo, t, f"p{i}", 1000) for i, t in enumerate(topics)]
    for p in producers:
        p.finish(timeout=90)
    for i, topic in enumerate(topics):
        assert_exactly_once(consume_all(topo, topic, "s", [f"p{i}"], 1000, tls=True), 1000)


def test_a_broker_cut_from_etcd_but_not_its_clients_stops_and_a_successor_takes_over(topo):
    victim = "broker-1"
    topic = _topic_owned_by(topo, victim, "zombie")
    producer = start_producer(topo, topic, "z", 4000, rate=200)
    producer.wait_acked(200, 60, "receipts before the cut")
    log = topo.part(victim).log_path
    cut_at = time.time()
    for host in ETCDS:
        topo.bed.cut(victim, host, both=True)
    others = [b for b in BROKERS if b != victim]
    successor = wait_for(lambda: (o := owner(topo, topic, ask=others[0])) != victim and o, SESSION_TTL_S + 40, 0.5,
                         "another broker to own the topic")
    assert successor in others
    # The broker's session watch looks every 0.2 s, so its line may follow
    # the successor's takeover by that much: wait for it, then judge its time.
    lost = wait_for(lambda: [line for line in log.read_text().splitlines() if "lost its metadata session" in line],
                    5, 0.1, "the cut broker to say it lost its session")
    assert _log_time(lost[-1]) - cut_at <= SESSION_TTL_S + 2, "it went on past its session"
    count_at_takeover = len(producer.acked())
    producer.wait_acked(count_at_takeover + 200, 60, "receipts from the successor while the cut lasts")
    topo.bed.heal()
    producer.finish(timeout=120)
    assert_exactly_once(consume_all(topo, topic, "s", ["z"], 4000), 4000)


def test_a_client_host_cut_off_and_back_its_retries_are_not_duplicated(topo):
    topic = unique("client-cut")
    producer = start_producer(topo, topic, "c", 3000, rate=250)
    producer.wait_acked(300, 60, "receipts before the cut")
    # The brokers' packets to the client vanish: sends arrive and are stored, their receipts are lost.
    for broker in BROKERS:
        topo.bed.cut(broker, CLIENT)
    before = len(producer.acked())
    time.sleep(5)
    stalled = len(producer.acked())
    # Back, on new connections (the old ones reset, as a keepalive timeout would end them):
    # the client sends every message still pending again, the stored ones among them.
    topo.bed.heal()
    for broker in BROKERS:
        topo.bed.reset(CLIENT, broker)
    assert stalled - before < 250, "receipts went on arriving through the cut"
    producer.finish(timeout=120)
    assert_exactly_once(consume_all(topo, topic, "s", ["c"], 3000), 3000)


def test_an_asymmetric_cut_from_a_broker_to_the_object_store_gives_no_receipt_and_loses_nothing(topo):
    victim = "broker-2"
    topic = _topic_owned_by(topo, victim, "objcut")
    producer = start_producer(topo, topic, "o", 2500, rate=200)
    producer.wait_acked(200, 60, "receipts before the cut")
    topo.bed.cut(victim, WEED_S3)  # one-way: the store's packets still reach the broker
    cut_at = time.time()
    time.sleep(6)
    healed_at = time.time()
    topo.bed.heal()
    producer.finish(timeout=120)
    during = [i for i, t in producer.acked().items() if cut_at + 3 < t < healed_at]
    assert not during, f"{len(during)} receipts while the broker could not reach the store"
    assert_exactly_once(consume_all(topo, topic, "s", ["o"], 2500), 2500)


def test_the_object_store_cut_off_from_everyone_no_receipt_meanwhile_nothing_lost(topo):
    topic = unique("store-gone")
    producer = start_producer(topo, topic, "g", 2500, rate=200)
    producer.wait_acked(200, 60, "receipts before the cut")
    topo.bed.isolate(WEED_S3)
    cut_at = time.time()
    time.sleep(6)
    healed_at = time.time()
    topo.bed.heal()
    producer.finish(timeout=120)
    during = [i for i, t in producer.acked().items() if cut_at + 3 < t < healed_at]
    assert not during, f"{len(during)} receipts while nobody could reach the store"
    assert_exactly_once(consume_all(topo, topic, "s", ["g"], 2500), 2500)


def test_a_whole_broker_host_lost_with_its_disk_its_topics_go_on_elsewhere(topo):
    victim = "broker-3"
    topic = _topic_owned_by(topo, victim, "hostlost")
    producer = start_producer(topo, topic, "h", 3000, rate=200)
    producer.wait_acked(200, 60, "receipts before the loss")
    topo.bed.lose(victim)
    shutil.rmtree(topo.root(victim) / "var" / "lib" / "magnetar")
    wait_for(lambda: owner(topo, topic, ask="broker-1") != victim, SESSION_TTL_S + 40, 0.5,
             "another broker to own the topic")
    producer.finish(timeout=120)
    assert_exactly_once(consume_all(topo, topic, "s", ["h"], 3000), 3000)


def test_one_etcd_member_partitioned_then_the_leaders_host_lost_the_cluster_goes_on_with_two(topo):
    topic = unique("etcd")
    producer = start_producer(topo, topic, "e", 5000, rate=200)
    producer.wait_acked(200, 60, "receipts before the faults")
    leader = etcd_leader(topo)
    follower = next(h for h in ETCDS if h != leader)
    topo.bed.isolate(follower)
    n = len(producer.acked())
    producer.wait_acked(n + 400, 60, "receipts while a member is partitioned away")
    topo.bed.heal()
    wait_for(lambda: topo.etcd_healthy(follower), 30, 0.2, "the partitioned member back")
    leader = etcd_leader(topo)
    topo.bed.lose(leader)
    remaining = [h for h in ETCDS if h != leader]
    wait_for(lambda: _leads_among(topo, remaining), 30, 0.2, "a leader among the two members left")
    n = len(producer.acked())
    producer.wait_acked(n + 400, 90, "receipts with two etcd members")
    producer.finish(timeout=120)
    assert_exactly_once(consume_all(topo, topic, "s", ["e"], 5000), 5000)


def _leads_among(topo, hosts) -> bool:
    try:
        return etcd_leader(topo, hosts) in hosts
    except AssertionError:
        return False


def test_a_spark_job_on_the_standalone_cluster_reads_and_writes_through_the_connector(topo):
    source, destination = unique("spark-in"), unique("spark-out")
    start_producer(topo, source, "k", 3000).finish(timeout=90)
    job = Path(__file__).with_name("spark_job.py")
    submit = Path(sys.executable).with_name("spark-submit")
    argv = [str(submit), "--master", topo.spark_master_url,
            "--conf", f"spark.driver.host={topo.address(CLIENT)}", "--conf", f"spark.driver.bindAddress={topo.address(CLIENT)}",
            "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1", "--conf", "spark.cores.max=2",
            "--conf", "spark.driver.memory=512m",
            "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
            "--conf", "spark.scheduler.maxRegisteredResourcesWaitingTime=90s",
            str(job), topo.service_url, TOPIC_PREFIX + source, TOPIC_PREFIX + destination]
    env = {"SPARK_LOCAL_IP": topo.address(CLIENT), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = topo.bed.run(CLIENT, argv, timeout=300, env=env)
    answer = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    assert answer["rows"] == 3000
    workers = {topo.address(h) for h in SPARK_WORKERS}
    assert workers <= set(answer["executors"]), f"executors ran on {answer['executors']}, workers are {workers}"
    verdict = consume_all(topo, destination, "s", [], 3000)
    assert verdict["distinct"] == 3000 and verdict["duplicates"] == 0, verdict


def test_a_volume_server_lost_with_its_disk_loses_nothing(topo):
    topic = unique("volume")
    start_producer(topo, topic, "v", 2000).finish(timeout=90)
    lost = WEED_VOLUMES[1]
    # The process killed and its disk deleted (its host answers with resets, so the master
    # drops it at once; a machine lost silently takes SeaweedFS about a minute: docs/deploy.md).
    topo.bed.kill_all(lost)
    shutil.rmtree(topo.root(lost) / "var" / "lib" / "seaweedfs")
    # Writes go on once the master has moved new writes to volumes on the two servers left.
    wait_for(topo.store_writable, 150, 0.5, "the object store to take writes with two volume servers")
    # Stateless brokers: every one restarted with its data directory deleted,
    # so what is read comes from the store, not from a broker's memory or disk.
    for host in BROKERS:
        topo.restart_broker(host, wipe=True)
    assert_exactly_once(consume_all(topo, topic, "s", ["v"], 2000, timeout=90), 2000)
    # The host comes back with an empty disk (for whatever runs after).
    topo.bed.heal()
    topo.start_volume(lost)
    topo.wait_volume(lost)
