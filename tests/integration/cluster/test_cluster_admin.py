"""``magnetar admin`` and ``magnetar cluster up`` as docs/cluster.md uses
them, on one real 3-broker cluster (its own etcd) for the whole module."""
from __future__ import annotations

import json
import os
import signal
import urllib.error
import urllib.request

import pulsar
import pytest
from typer.testing import CliRunner

from magnetar.cli import app

from magnetar_harness.cluster import LocalCluster
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = LocalCluster(tmp_path_factory.mktemp("admin") / "cluster", brokers=3, session_ttl=3.0).start()
    yield c
    assert c.stop() == 0, "cluster up did not stop cleanly"


def admin(cluster, *args: str, member: int = 0):
    result = CliRunner().invoke(app, ["admin", "--url", cluster.members[member].admin_url, "--json", *args])
    assert result.exit_code == 0, f"{args}: {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout) if result.stdout.strip() else None


def test_brokers_list_names_every_member(cluster):
    expected = sorted(m.broker_id for m in cluster.members)
    assert admin(cluster, "brokers", "list") == expected
    assert admin(cluster, "brokers", "list", "cluster", member=2) == expected


def test_the_split_example_of_the_docs_runs_as_written(cluster):
    # docs/cluster.md "Splitting a bundle": orders and invoices share a bundle
    # of public/default (4 bundles); a first producer makes it owned.
    client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
    try:
        for name in ("orders", "invoices"):
            client.create_producer(f"persistent://public/default/{name}").send(b"hi")
    finally:
        client.close()
    orders = "persistent://public/default/orders"
    assert admin(cluster, "namespaces", "bundles", "public/default")["numBundles"] == 4
    admin(cluster, "namespaces", "split-bundle", "public/default", "--topic", orders,
          "--split-algorithm-name", "topic_count_equally_divide")
    admin(cluster, "namespaces", "split-bundle", "public/default", "--topic", orders)
    admin(cluster, "namespaces", "unload", "public/default", "--topic", orders)
    assert admin(cluster, "namespaces", "bundles", "public/default")["numBundles"] == 6


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_topic_operations_sent_to_another_broker_are_redirected_to_the_owner(cluster):
    topic = "persistent://public/default/redirected"
    client = pulsar.Client(cluster.members[0].service_url, operation_timeout_seconds=30)
    try:
        client.create_producer(topic).send(b"one")
    finally:
        client.close()
    owner = admin(cluster, "brokers", "lookup", topic)["httpUrl"]
    other = next(k for k, m in enumerate(cluster.members) if m.admin_url != owner)
    path = "/admin/v2/persistent/public/default/redirected/stats?getPreciseBacklog=true"
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as answer:
        opener.open(cluster.members[other].admin_url + path, timeout=30)
    assert answer.value.code == 307, answer.value.read()
    assert answer.value.headers["Location"] == owner + path  # same path and query, on the owner
    # The CLI follows, for reads and for writes (same method and body at the owner).
    assert admin(cluster, "topics", "stats", topic, member=other)["msgInCounter"] == 1
    admin(cluster, "topics", "create-subscription", topic, "-s", "audit", "-m", "earliest", member=other)
    admin(cluster, "topics", "skip", topic, "-s", "audit", "-n", "1", member=other)
    assert admin(cluster, "topics", "stats", topic, member=other)["subscriptions"]["audit"]["msgBacklog"] == 0


def test_a_killed_member_is_reported_once_and_sighup_starts_it_again(cluster):
    victim = cluster.members[1]
    os.kill(victim.pid, signal.SIGKILL)
    said = f"broker 1 (pid {victim.pid}) exited with -9"
    wait_for(lambda: any(said in line for line in cluster.output), 30, what="the exit reported")
    assert any(f"kill -HUP {cluster.proc.pid}" in line for line in cluster.output if said in line)
    cluster.restart_exited()
    wait_for(lambda: cluster.members[1].pid != victim.pid, 90, what="broker 1 started again")
    assert cluster.members[1].admin_url == victim.admin_url  # the same ports and files
    wait_for(lambda: victim.broker_id in admin(cluster, "brokers", "list"), 30, what="broker 1 registered")
    # Seconds passed since the exit (a broker's start): the supervisor said it once.
    assert sum(said in line for line in cluster.output) == 1, cluster.output
