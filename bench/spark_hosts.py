"""Spark through the connector on the test bed's standalone cluster, beside
``local[2]`` on loopback: bench/spark_bench.py's official-client workloads,
run by the same command in both places.

    sudo .venv/bin/python -m bench.spark_hosts --place hosts [--rows 200000] [--repeat 3]
    sudo .venv/bin/python -m bench.spark_hosts --place loopback [--rows 200000] [--repeat 3]

The workloads are spark_bench's ``--only official`` (its module says what
each is): three topics of 2 partitions written by the official client
(batched, one message per entry, LZ4 with keys and properties), each read
through the connector into ``noop`` beside Spark's Python source ceiling;
the one-message-per-entry topic copied by a stream (AvailableNow, the
exactly-once sink) beside the stream copy ceiling; a batch write beside the
sink ceiling. Medians of ``--repeat`` runs, each run's seconds printed.

- ``hosts``: the deployment of docs/deploy.md with Spark
  (magnetar_harness/host_topology.py: 3 brokers on object storage, a
  3-member etcd, SeaweedFS split, a Spark standalone master and two
  workers). The bench's driver runs on the client host (the official
  client writes from there, to the three brokers' service URL), its
  executors on the two worker hosts (one core and 512 MiB each,
  ``spark.cores.max`` 2: the same two tasks as ``local[2]``). After the
  run each worker's own status page must list the bench's executor, or
  the run fails.
- ``loopback``: ``magnetar cluster up --brokers 3 --storage object`` on
  this machine's loopback (one etcd, one ``weed mini``; deduplication on
  and a 10 s session, as deploy/broker.toml), spark_bench with
  ``--master local[2]``.

Root only for ``hosts`` (namespaces). Each place is one hold of the bench
lock (a few minutes); run them one after the other and record both with
their load averages. A benchmark, not a test: results go to docs/spark.md
and docs/deploy.md with the command lines.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from magnetar_harness.cluster import LocalCluster
from magnetar_harness.host_topology import CLIENT, SPARK_WORKERS, default_base, host_topology
from bench.servers import require_compiled

REPO = Path(__file__).resolve().parents[1]
TAG = "hspark"


def bench_command(master: str, url: str, admin_url: str, rows: int, repeat: int, conf: dict[str, str]) -> list[str]:
    confs = [a for k, v in conf.items() for a in ("--conf", f"{k}={v}")]
    return [sys.executable, "-m", "bench.spark_bench", "--master", master, "--url", url, "--admin-url", admin_url,
            "--only", "official", "--rows", str(rows), "--repeat", str(repeat), "--json", *confs]


def results_of(stdout: str) -> list[dict]:
    return json.loads([line for line in stdout.splitlines() if line.startswith("[{")][-1])


def on_hosts(args) -> dict:
    topo = host_topology(args.tag, default_base(args.tag))
    try:
        topo.start(spark=True)
        client = topo.address(CLIENT)
        conf = {"spark.driver.host": client, "spark.driver.bindAddress": client, "spark.driver.memory": "512m",
                "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2",
                "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                "spark.scheduler.maxRegisteredResourcesWaitingTime": "90s",
                # The executors import bench.spark_ceilings (the ceilings' data sources).
                "spark.executorEnv.PYTHONPATH": str(REPO)}
        argv = bench_command(topo.spark_master_url, topo.service_url, topo.admin_url("broker-1"), args.rows,
                             args.repeat, conf)
        env = {"SPARK_LOCAL_IP": client, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "PYTHONPATH": str(REPO)}
        began = time.monotonic()
        done = topo.bed.run(CLIENT, argv, timeout=args.timeout, env=env)
        print(done.stdout, flush=True)
        executors = {host: _finished_executors(topo.address(host)) for host in SPARK_WORKERS}
        missing = [host for host, n in executors.items() if n == 0]
        if missing:
            raise SystemExit(f"no executor of the bench ran on {', '.join(missing)}: {executors}")
        return {"place": "hosts", "master": topo.spark_master_url, "executors_per_worker": executors,
                "seconds": round(time.monotonic() - began), "results": results_of(done.stdout)}
    finally:
        topo.stop()


def _finished_executors(address: str) -> int:
    """Executors the worker at ``address`` ran (its status page, port 8081)."""
    with urllib.request.urlopen(f"http://{address}:8081/json/", timeout=10) as r:
        status = json.load(r)
    return len(status.get("finishedexecutors", [])) + len(status.get("executors", []))


def on_loopback(args) -> dict:
    with tempfile.TemporaryDirectory(prefix="spark-hosts-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=3, storage="object", session_ttl=10.0,
                               broker_config="deduplication_enabled = true\n").start()
        try:
            url = ",".join(m.service_url for m in cluster.members).replace(",pulsar://", ",")
            began = time.monotonic()
            done = subprocess.run(bench_command("local[2]", url, cluster.members[0].admin_url, args.rows,
                                                args.repeat, {}),
                                  capture_output=True, text=True, timeout=args.timeout, cwd=REPO,
                                  env=dict(os.environ, PYTHONPATH=str(REPO)))
            print(done.stdout, flush=True)
            if done.returncode != 0:
                raise SystemExit(f"spark_bench failed ({done.returncode}):\n{done.stderr[-3000:]}")
            return {"place": "loopback", "master": "local[2]", "seconds": round(time.monotonic() - began),
                    "results": results_of(done.stdout)}
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--place", choices=["hosts", "loopback"], required=True)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tag", default=TAG, help="the test bed's tag (its namespaces are mg-TAG-*)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds the bench may take")
    parser.add_argument("--json", help="write the place's results here")
    args = parser.parse_args()
    require_compiled()
    load = os.getloadavg()[0]
    print(f"{args.place}: {args.rows:,} rows, {args.repeat} repeats, load average {load:.1f} on {os.cpu_count()} CPUs",
          flush=True)
    out = on_hosts(args) if args.place == "hosts" else on_loopback(args)
    out.update(load_before=load, load_after=os.getloadavg()[0])
    print(f"load average {load:.1f} -> {out['load_after']:.1f}; {out['seconds']} s of bench", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
