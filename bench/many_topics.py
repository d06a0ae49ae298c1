"""Many topics on one standalone broker (issue 32's benchmark).

    .venv/bin/python bench/many_topics.py --topics 100000 [--json bench/results/many-topics.json]

1. Starts a broker on a fresh data directory (free ports, this tree's code)
   and creates ``--topics`` topics with ``magnetar perf produce --topics N
   --messages N`` (one producer per topic, one message each): the time it
   takes, then the broker's RSS per loaded topic (over its RSS before) and
   its open files.
2. Scrapes ``/metrics`` (time, size) with topic-level series on, lists the
   namespace's topics (latency).
3. Stops the broker (the time a clean stop takes: every loaded topic's
   ledger is sealed) and starts it again with topic-level series off:
   time to READY, the time from READY to the first receipt on a random
   topic (official client: connect, producer, send) and on five more,
   loaded topics then,
   the namespace list again, a scrape.
4. Loads every topic again (``perf consume``, one reader each) and scrapes
   with topic-level series off; then a clean stop (those topics were read,
   not written: nothing to seal).

Prints one JSON document; ``--json`` saves it. Stops its broker and
deletes its data directory (``--keep`` keeps it). The publish latency
and fsyncs/s of many *written* topics (issue 41) are
:mod:`bench.written_topics`'s. ``--data DIR`` measures
on a copy of a kept directory instead (:func:`stored_topics`): restart,
first receipts, every topic loaded again, a scrape with topic-level
series, a clean stop.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NS = "public/default"


class MeasuredBroker:
    def __init__(self, data: Path, config: str, root: Path = ROOT) -> None:
        """``root``: the checkout whose code the broker runs (this one by default)."""
        self.data = data
        self.root = root
        self.config_path = data.parent / "broker.toml"
        self.config_path.write_text(config)
        self.proc: subprocess.Popen | None = None
        self.port = self.admin = 0
        self.ready_at = 0.0

    def start(self, timeout: float = 600.0) -> float:
        """Start; returns seconds from exec to the READY line."""
        ready = threading.Event()
        log = open(self.data.parent / "broker.log", "ab")
        env = dict(os.environ, PYTHONPATH=str(self.root), PYTHONUNBUFFERED="1")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "magnetar.cli", "standalone", "--data-dir", str(self.data),
             "--port", str(self.port), "--admin-port", str(self.admin), "--config", str(self.config_path),
             "--log-level", "WARNING"],
            stdout=subprocess.PIPE, stderr=log, env=env, cwd=self.root)  # -m puts the cwd first on sys.path

        def read() -> None:
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith("READY "):
                    self.ready_at = time.monotonic()
                    fields = dict(p.split("=", 1) for p in line.split()[1:])
                    self.port, self.admin = int(fields["pulsar"]), int(fields["admin"])
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout):
            raise SystemExit("the broker did not become ready")
        return self.ready_at - t0

    def stop(self) -> float:
        t0 = time.monotonic()
        self.proc.terminate()
        self.proc.wait(3600)
        return time.monotonic() - t0

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    def get(self, path: str) -> tuple[float, bytes]:
        t0 = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}{path}", timeout=600) as answer:
            body = answer.read()
        return time.monotonic() - t0, body

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def loaded(self) -> int:
        _, body = self.get("/metrics")
        for line in body.decode().splitlines():
            if line.startswith("magnetar_topics_loaded "):
                return int(float(line.split()[1]))
        return -1


def perf(kind: str, url: str, topics: int, extra: list[str], duration: int = 0) -> float:
    """``magnetar perf KIND`` on topics mt-0..mt-<topics - 1>, one message each
    (``duration`` > 0: at most that many seconds); its wall time."""
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "magnetar.cli", "perf", kind, "-u", url, "-t", "mt", "--topics",
                           str(topics), "--messages", str(topics), "--duration", str(duration), *extra],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=sys.stderr, stderr=sys.stderr)
    if done.returncode:
        print(f"perf {kind} exited with {done.returncode} (its errors are above); going on", file=sys.stderr)
    return time.monotonic() - t0


def note(result: dict, key: str, value) -> None:
    """Record a figure and show it at once (a 100,000-topic run takes a while)."""
    result[key] = value
    print(f"{key}: {value}", file=sys.stderr, flush=True)


def scrape(broker: MeasuredBroker) -> dict:
    seconds, body = broker.get("/metrics")
    return {"seconds": round(seconds, 3), "bytes": len(body)}


def topic_list(broker: MeasuredBroker) -> dict:
    seconds, body = broker.get(f"/admin/v2/persistent/{NS}")
    return {"seconds": round(seconds, 3), "topics": len(json.loads(body))}


def stored_topics(args) -> None:
    """On a copy of ``args.data`` (``--topics`` topics stored, as a SIGKILL
    left them): start (topic-level series on) to READY, the first receipts,
    the namespace list; then the topics loaded (``perf consume``), RSS per
    loaded topic, open files, a scrape with topic-level series; then a clean
    stop of those topics, which were read and not written since they loaded.
    ``--reload N``: only the first N topics are loaded again."""
    work = Path(tempfile.mkdtemp(prefix="many-topics-"))
    n = args.topics
    result: dict = {"topics": n, "data": str(args.data), "cpus": os.cpu_count(),
                    "load_average_at_start": os.getloadavg()}
    subprocess.run(["cp", "-a", str(args.data), str(work / "data")], check=True)
    broker = MeasuredBroker(work / "data", "topic_idle_unload_s = 0.0\n")
    try:
        import pulsar

        note(result, "restart_to_ready_seconds", round(broker.start(), 2))
        client = pulsar.Client(broker.url, operation_timeout_seconds=60)
        topic = f"persistent://{NS}/mt-{random.randrange(n)}"
        client.create_producer(topic).send(b"first")
        note(result, "first_receipt", {"topic": topic,
                                       "seconds_after_ready": round(time.monotonic() - broker.ready_at, 3)})
        others = []
        for _ in range(5):
            t0 = time.monotonic()
            client.create_producer(f"persistent://{NS}/mt-{random.randrange(n)}").send(b"first")
            others.append(round(time.monotonic() - t0, 3))
        note(result, "first_receipt_other_topics_seconds", others)
        client.close()
        note(result, "loaded_after_first_receipts", broker.loaded())
        note(result, "topic_list_after_restart", topic_list(broker))
        note(result, "open_files_after_restart", broker.open_files())
        base_rss, base_loaded = broker.rss_kib(), broker.loaded()
        reload = args.reload or n
        note(result, "reloaded_topics", reload)
        # A subscription of its own (a kept directory's topics may have been
        # read before), and a cap: topics whose creation's send failed hold
        # no message, so the count may never be reached.
        note(result, "reload_seconds", round(perf("consume", broker.url, reload, [
            "--position", "earliest", "--subscription", f"reload-{os.getpid()}", "--consumer-workers",
            str(args.workers)], duration=240), 1))
        loaded = broker.loaded()
        note(result, "loaded_after_reload", loaded)
        note(result, "open_files_after_reload", broker.open_files())
        rss = broker.rss_kib()
        note(result, "rss_mib_after_reload", round(rss / 1024, 1))
        note(result, "rss_kib_per_loaded_topic", round((rss - base_rss) / max(1, loaded - base_loaded), 1))
        note(result, "metrics_topic_level_on", scrape(broker))
        note(result, "metrics_topic_level_on_again", scrape(broker))
        note(result, "clean_stop_after_reload_seconds", round(broker.stop(), 1))
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.kill()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=100_000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--workers", type=int, default=8, help="perf worker processes creating producers/consumers")
    ap.add_argument("--reload", type=int, default=0,
                    help="topics loaded again after the restart for the scrape without topic-level series "
                         "(default: all)")
    ap.add_argument("--crash-stop", action="store_true",
                    help="SIGKILL instead of a clean stop (which seals every loaded topic's ledger)")
    ap.add_argument("--data", type=Path,
                    help="a data directory with --topics topics stored (a --keep run's, left by SIGKILL): "
                         "measure on a copy of it, without creating them (see stored_topics)")
    args = ap.parse_args()
    if args.data:
        stored_topics(args)
        return
    work = Path(tempfile.mkdtemp(prefix="many-topics-"))
    data = work / "data"
    n = args.topics
    result: dict = {"topics": n, "cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()}
    on = "topic_idle_unload_s = 0.0\n"  # keep every topic loaded while measuring
    broker = MeasuredBroker(data, on)
    try:
        broker.start()
        time.sleep(1)
        base_rss = broker.rss_kib()
        note(result, "create_seconds", round(perf("produce", broker.url, n, ["-s", "100", "--no-batching",
                                                                             "--ceiling", "0", "--producer-workers",
                                                                             str(args.workers)]), 1))
        loaded = broker.loaded()
        rss = broker.rss_kib()
        note(result, "loaded_after_create", loaded)
        note(result, "rss_mib", round(rss / 1024, 1))
        note(result, "rss_kib_per_loaded_topic", round((rss - base_rss) / max(1, loaded), 1))
        note(result, "open_files", broker.open_files())
        note(result, "metrics_topic_level_on", scrape(broker))
        note(result, "topic_list", topic_list(broker))
        if args.crash_stop:
            broker.proc.kill()
            broker.proc.wait()
            note(result, "stop", "SIGKILL")
        else:
            note(result, "clean_stop_seconds", round(broker.stop(), 1))

        # The same start on an empty data directory, just before: the part of
        # READY that is the machine's (imports, a loaded host), not the topics'.
        (work / "empty").mkdir()
        empty = MeasuredBroker(work / "empty" / "data", on)
        note(result, "empty_broker_ready_seconds", round(empty.start(), 2))
        empty.proc.kill()
        empty.proc.wait()
        broker.config_path.write_text(on + "expose_topic_level_metrics_in_prometheus = false\n")
        import pulsar  # before the clock starts: the client's import is not the broker's latency

        client = pulsar.Client(broker.url, operation_timeout_seconds=60)  # same port after the restart
        topic = f"persistent://{NS}/mt-{random.randrange(n)}"
        note(result, "restart_to_ready_seconds", round(broker.start(), 2))
        producer = client.create_producer(topic)
        producer.send(b"first")
        note(result, "first_receipt", {"topic": topic,
                                       "seconds_after_ready": round(time.monotonic() - broker.ready_at, 3)})
        # More first uses, one topic after another (the first one above also
        # paid for the client's connection): a loaded machine's noise shows.
        others = []
        for _ in range(5):
            t0 = time.monotonic()
            client.create_producer(f"persistent://{NS}/mt-{random.randrange(n)}").send(b"first")
            others.append(round(time.monotonic() - t0, 3))
        note(result, "first_receipt_other_topics_seconds", others)
        client.close()
        note(result, "loaded_after_first_receipt", broker.loaded())
        note(result, "topic_list_after_restart", topic_list(broker))
        note(result, "loaded_after_list", broker.loaded())
        note(result, "open_files_after_restart", broker.open_files())
        reload = args.reload or n
        note(result, "reloaded_topics", reload)
        note(result, "reload_seconds", round(perf("consume", broker.url, reload, ["--position", "earliest",
                                                                                  "--consumer-workers",
                                                                                  str(args.workers)]), 1))
        note(result, "loaded_after_reload", broker.loaded())
        note(result, "open_files_after_reload", broker.open_files())
        note(result, "rss_mib_after_reload", round(broker.rss_kib() / 1024, 1))
        note(result, "metrics_topic_level_off", scrape(broker))
        # Those topics were read, not written, since they loaded: a stop has
        # nothing to seal or snapshot for them.
        note(result, "clean_stop_after_reload_seconds", round(broker.stop(), 1))
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.proc.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
