"""What the host tests share: the deployment on its test bed for a module,
a producer running on the client host, a consumer's verdict, the owner of
a topic, etcd's leader."""
from __future__ import annotations

import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from magnetar_harness.host_topology import BROKERS, CLIENT, ETCD_CLIENT_PORT, ETCDS, Topology
from magnetar_harness.hosts import Process
from magnetar_harness.waiting import wait_for

TOPIC_PREFIX = "persistent://public/default/"


@dataclass
class RunningProducer:
    """``host_client produce`` on the client host; :meth:`acked` reads how far it got."""
    process: Process
    acked_path: Path
    count: int

    def acked(self) -> dict[int, float]:
        """Sequence id -> the time its receipt arrived."""
        try:
            lines = self.acked_path.read_text().splitlines()
        except FileNotFoundError:
            return {}
        out = {}
        for line in lines:
            parts = line.split()
            if len(parts) == 2:
                out[int(parts[0])] = float(parts[1])
        return out

    def wait_acked(self, n: int, timeout: float, what: str) -> None:
        wait_for(lambda: len(self.acked()) >= n or not self._alive_or_fail(), timeout, 0.1, what)
        assert len(self.acked()) >= n, f"{what}: {len(self.acked())} acknowledged; producer log:\n" \
                                       f"{self.process.log_tail(40)}"

    def _alive_or_fail(self) -> bool:
        if not self.process.alive and self.process.popen.returncode != 0:
            raise AssertionError(f"the producer failed ({self.process.popen.returncode}):\n{self.process.log_tail(40)}")
        return self.process.alive

    def finish(self, timeout: float) -> None:
        """Wait for every message to be acknowledged and the producer to exit 0."""
        wait_for(lambda: not self._alive_or_fail(), timeout, 0.2, "the producer to finish")
        assert self.process.popen.returncode == 0, self.process.log_tail(40)
        assert len(self.acked()) == self.count, f"{len(self.acked())} of {self.count} acknowledged"


def start_producer(topo: Topology, topic: str, name: str, count: int, *, rate: float = 0.0,
                   tls: bool = False) -> RunningProducer:
    acked = topo.base / CLIENT / f"{name}.acked"
    argv = [sys.executable, "-m", "magnetar_harness.host_client", "produce", "--topic", TOPIC_PREFIX + topic,
            "--name", name, "--count", str(count), "--rate", str(rate), "--acked", str(acked),
            *_url(topo, tls)]
    proc = topo.bed.start(CLIENT, f"producer-{name}", argv, topo.base / CLIENT / f"producer-{name}.log")
    return RunningProducer(proc, acked, count)


def consume_all(topo: Topology, topic: str, subscription: str, names: list[str], count: int, *,
                tls: bool = False, timeout: float = 60.0, kind: str = "Exclusive") -> dict:
    """Every message of ``topic`` from the earliest, read on the client host: its verdict."""
    argv = [sys.executable, "-m", "magnetar_harness.host_client", "consume", "--topic", TOPIC_PREFIX + topic,
            "--subscription", subscription, "--count", str(count), "--timeout", str(timeout), "--type", kind,
            "--expect-names", *names, *_url(topo, tls)]
    result = topo.bed.run(CLIENT, argv, timeout=timeout + 60)
    return json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def assert_exactly_once(verdict: dict, count: int) -> None:
    assert verdict["missing"] == [], f"lost: {verdict}"
    assert verdict["distinct"] == count, f"lost: {verdict}"
    assert verdict["duplicates"] == 0, f"duplicated: {verdict}"
    assert verdict["order_breaks"] == 0, f"out of order: {verdict}"


def _url(topo: Topology, tls: bool) -> list[str]:
    if tls:
        return ["--url", topo.tls_service_url, "--ca", str(topo.ca_file)]
    return ["--url", topo.service_url]


def get_json(url: str, timeout: float = 5.0, method: str = "GET", body: bytes | None = None):
    request = urllib.request.Request(url, method=method, data=body,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
    with urllib.request.urlopen(request, timeout=timeout) as r:
        text = r.read()
        return json.loads(text) if text.strip() else None


def owner(topo: Topology, topic: str, ask: str | None = None) -> str:
    """The broker host that owns ``topic`` (looked up through ``ask``, else any broker that answers)."""
    by_address = {topo.address(h): h for h in BROKERS}
    for broker in [ask] if ask else BROKERS:
        try:
            url = get_json(f"{topo.admin_url(broker)}/lookup/v2/topic/persistent/public/default/{topic}",
                           timeout=20)["brokerUrl"]
            return by_address[url.removeprefix("pulsar://").rsplit(":", 1)[0]]
        except OSError:
            continue
    raise AssertionError("no broker answers a lookup")


def etcd_status(topo: Topology, host: str) -> dict | None:
    try:
        return get_json(f"http://{topo.address(host)}:{ETCD_CLIENT_PORT}/v3/maintenance/status", method="POST",
                        body=b"{}", timeout=3)
    except OSError:
        return None


def etcd_leader(topo: Topology, among=ETCDS) -> str:
    """The etcd host whose member leads (as the members that answer say)."""
    for host in among:
        status = etcd_status(topo, host)
        if status and status.get("leader") == status["header"]["member_id"]:
            return host
    raise AssertionError("no etcd member says it leads")


def since(t: float) -> float:
    return time.time() - t
