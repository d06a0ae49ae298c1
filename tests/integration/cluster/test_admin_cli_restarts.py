"""A clean stop moves the broker's bundles first (PIP-307), so its clients
follow without a lookup; ``brokers drain`` does it without stopping; and
``brokers restart-rolling`` restarts every broker that way."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from magnetar_harness.cluster import LocalCluster, Member
from magnetar_harness.steady_load import LookupWatch, SteadyLoad, lookups_of as steady_lookups
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)
TOPICS = [f"persistent://public/default/steady-{k}" for k in range(6)]
#: A restarted broker counts as serving once it sent a load report: sooner than every 5 s, for the test's time.
FAST_REPORTS = "load_balancer_report_interval_s = 1.0\n"


def multi_host(cluster: LocalCluster) -> str:
    return "pulsar://" + ",".join(m.service_url.removeprefix("pulsar://") for m in cluster.members)


def lookups_of(member: Member) -> int | None:
    return steady_lookups(member.admin_url)


def busiest(cluster: LocalCluster) -> Member:
    owners = cluster.owners()
    return max(cluster.members, key=lambda m: sum(1 for o in owners.values() if o == m.broker_id))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "magnetar.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(params=["file", "object"])
def cluster(tmp_path, request):
    c = LocalCluster(tmp_path / "cluster", brokers=3, session_ttl=5.0, storage=request.param).start()
    yield c
    c.stop()


def test_sigterm_moves_the_bundles_first_no_error_no_lookup_nothing_lost(cluster):
    b0 = cluster.members[0]
    cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
    load = SteadyLoad(multi_host(cluster), TOPICS).start()
    try:
        wait_for(lambda: load.messages_received() >= 300, 60, what="traffic flowing")
        victim = busiest(cluster)
        assert victim.broker_id in cluster.owners().values()
        survivors = [m for m in cluster.members if m is not victim]
        watch = LookupWatch(victim.admin_url)
        before = sum(lookups_of(m) for m in survivors) + watch.last
        os.kill(victim.pid, signal.SIGTERM)
        wait_for(lambda: any(f"(pid {victim.pid}) exited with 0" in line for line in cluster.output), 60,
                 what="the broker's clean exit")
        sent_at_stop = load.messages_sent()
        wait_for(lambda: load.messages_sent() >= sent_at_stop + 300, 60, what="traffic after the stop")
        after = sum(lookups_of(m) for m in survivors) + watch.final()
    finally:
        result = load.stop()
    print(f"SIGTERM under load ({cluster.storage}): {result.sent} sent, {len(result.errors)} errors, "
          f"{after - before} lookups, lost {result.lost}, worst send {result.worst_send_ms:.0f} ms")
    assert not result.errors, result.errors[:3]
    assert result.lost == 0, "acknowledged and not received"
    assert after == before, f"{after - before} lookups: a client was sent away instead of to the new owner"
    # Every bundle went to a survivor.
    assert set(cluster.owners().values()) <= {m.broker_id for m in survivors} | {None}


@pytest.mark.parametrize("cluster", ["file"], indirect=True)
def test_drain_from_the_cli_moves_every_bundle_and_keeps_new_ones_away(cluster):
    b0, b1 = cluster.members[0], cluster.members[1]
    load = SteadyLoad(multi_host(cluster), TOPICS).start()
    try:
        wait_for(lambda: load.messages_received() >= 200, 60, what="traffic flowing")
        victim = busiest(cluster)
        before = sum(lookups_of(m) for m in cluster.members)
        done = cli("admin", "--url", b0.admin_url, "--json", "brokers", "drain", victim.broker_id)
        assert done.returncode == 0, done.stderr
        assert '"failed": {}' in done.stdout, done.stdout
        assert victim.broker_id not in cluster.owners().values()
        sent = load.messages_sent()
        wait_for(lambda: load.messages_sent() >= sent + 200, 60, what="traffic after the drain")
        # A topic of a bundle nobody owned yet does not go to the drained broker.
        fresh = cluster.admin(b1, "/lookup/v2/topic/persistent/public/default/fresh-after-drain")
        assert fresh["httpUrl"] != victim.admin_url
        assert sum(lookups_of(m) for m in cluster.members) == before + 1  # only our own lookup
        done = cli("admin", "--url", victim.admin_url, "brokers", "undrain")
        assert done.returncode == 0, done.stderr
        load_doc = cluster.admin(b1, "/admin/v2/broker-stats/load-report")
        wait_for(lambda: not cluster.admin(b1, "/admin/v2/broker-stats/load-report")[victim.broker_id]["draining"],
                 10, what="undrained")
        assert victim.broker_id in load_doc
        # Pulsar's graceful shutdown: drain, then the process exits cleanly.
        done = cli("admin", "--url", b0.admin_url, "brokers", "shutdown", victim.broker_id)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: any(f"(pid {victim.pid}) exited with 0" in line for line in cluster.output), 60,
                 what="the broker's clean exit")
        sent = load.messages_sent()
        wait_for(lambda: load.messages_sent() >= sent + 200, 60, what="traffic after the shutdown")
    finally:
        result = load.stop()
    assert not result.errors and result.lost == 0


def test_a_standalone_broker_cannot_be_drained(tmp_path):
    from tests.helpers import start_broker, stop_broker

    proc = start_broker(tmp_path / "standalone")
    try:
        done = cli("admin", "--url", proc.admin_url, "brokers", "drain")
        assert done.returncode == 1 and "standalone" in done.stderr, done.stderr
    finally:
        stop_broker(proc)


def test_restart_rolling_restarts_every_broker_under_traffic_without_errors(tmp_path):
    cluster = LocalCluster(tmp_path / "rolling", brokers=3, session_ttl=5.0, restart_exited=True,
                           broker_config=FAST_REPORTS).start()
    try:
        b0 = cluster.members[0]
        cluster.admin(b0, "/admin/v2/namespaces/public/default/deduplication", "POST", True)
        pids = {m.index: m.pid for m in cluster.members}
        load = SteadyLoad(multi_host(cluster), TOPICS).start()
        try:
            wait_for(lambda: load.messages_received() >= 200, 60, what="traffic flowing")
            done = cli("admin", "--url", b0.admin_url, "brokers", "restart-rolling", "--settle", "2")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "3 brokers restarted" in done.stdout
        finally:
            result = load.stop()
        assert all(m.pid != pids[m.index] for m in cluster.members), "a broker was not restarted"
        print(f"rolling restart: {result.sent} sent, {len(result.errors)} errors, lost {result.lost}, "
              f"worst send {result.worst_send_ms:.0f} ms")
        assert not result.errors, result.errors[:3]
        assert result.lost == 0
    finally:
        cluster.stop()


@pytest.mark.parametrize("cluster", ["file"], indirect=True)
def test_a_dynamic_setting_changed_through_one_broker_applies_on_every_broker(cluster):
    b0 = cluster.members[0]
    done = cli("admin", "--url", b0.admin_url, "brokers", "update-dynamic-config",
               "--config", "load_balancer_load_threshold", "--value", "0.25")
    assert done.returncode == 0, done.stderr
    for m in cluster.members:
        wait_for(lambda m=m: cluster.admin(m, "/admin/v2/brokers/configuration/runtime")[
            "load_balancer_load_threshold"] == 0.25, 10, what=f"{m.broker_id} applied it")
    done = cli("admin", "--url", cluster.members[2].admin_url, "brokers", "delete-dynamic-config",
               "--config", "load_balancer_load_threshold")
    assert done.returncode == 0, done.stderr
    for m in cluster.members:
        wait_for(lambda m=m: cluster.admin(m, "/admin/v2/brokers/configuration/runtime")[
            "load_balancer_load_threshold"] == 0.5, 10, what=f"{m.broker_id} back to its file's value")


def test_restart_rolling_with_a_restart_command_drains_then_runs_it_for_each_broker(tmp_path):
    """The --exec form (an operator's ``ssh {host} systemctl restart ...``):
    here a script that SIGTERMs the broker listening on ``{port}``, which
    ``cluster up --restart-exited`` starts again."""
    cluster = LocalCluster(tmp_path / "rolling-exec", brokers=2, session_ttl=5.0, restart_exited=True,
                           broker_config=FAST_REPORTS).start()
    try:
        pids = {m.index: m.pid for m in cluster.members}
        script = tmp_path / "restart.sh"
        script.write_text("case $1 in\n" + "".join(
            f"  {m.admin_url.rsplit(':', 1)[1]}) kill -TERM {m.pid} ;;\n" for m in cluster.members) + "esac\n")
        b0 = cluster.members[0]
        done = cli("admin", "--url", b0.admin_url, "brokers", "restart-rolling", "--settle", "1",
                   "--exec", f"sh {script} {{port}}")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 brokers restarted" in done.stdout
        assert done.stderr.count(": draining") == 2, done.stderr
        assert all(m.pid != pids[m.index] for m in cluster.members), "a broker was not restarted"
    finally:
        cluster.stop()
