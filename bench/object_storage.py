"""Ledgers on segment files against ledgers on object storage, in one run.

    .venv/bin/python -m bench.object_storage [--seconds 10] [--traffic-minutes 1] [--json PATH]
    .venv/bin/python -m bench.object_storage --latency-only     # the latency runs alone

For each backend (``file``, then ``object``) it starts a cluster of ``--brokers`` (3)
with ``magnetar cluster up --storage B`` (its own etcd; with ``object`` its
own SeaweedFS on loopback) and measures, with ``magnetar perf``'s runner
(the official client, 100-byte messages, batching on):

- produce throughput at max rate over ``--topics`` topics (spread over the
  cluster's bundles, so over its brokers);
- publish latency p50 / p99 / max at 5,000 and 20,000 msg/s (same topics);
  with ``object`` also where the commits' time went during each run (the
  brokers' ``magnetar_object_commit_phase_seconds``: gather, put, wait,
  transaction, receipts, total);
- object only: PUTs per second per broker with 1 active topic and with
  ``--many-topics`` (1,000) active topics, from the brokers'
  ``magnetar_object_puts_total`` counters sampled while the load runs;
- catch-up read throughput: the throughput run's topics unloaded (their new
  owners' caches are cold: ``object`` reads by ranged GETs), then one
  consumer per topic reads everything from the earliest;
- etcd keys and bytes per topic after ``--traffic-minutes`` of traffic on
  ``--traffic-topics`` topics (each with a subscription), from etcd itself.

It prints a table and the targets (object's throughput >= 25 % of file's,
p99 <= 50 ms at 20,000 msg/s, PUTs per broker per second <= 1000 / commit
interval whatever the topic count); ``--json`` keeps every raw result. A
benchmark, not a test: record results with the command line in bench/README.md.
"""
from __future__ import annotations

import argparse
import base64
import json
import re
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

from bench.sampling import PeriodicSampler
from magnetar.perf.runner import run
from magnetar.perf.spec import WorkloadSpec
from magnetar_harness.cluster import LocalCluster

NAMESPACE = "public/default"
PUTS = re.compile(r"^magnetar_object_puts_total (\S+)$", re.M)
PHASE = re.compile(r'^magnetar_object_commit_phase_seconds_(bucket|sum)\{(?:le="([^"]+)",)?phase="(\w+)"\} (\S+)$',
                   re.M)


def admin_put(cluster: LocalCluster, path: str) -> None:
    """A PUT on any broker, following the owner's 307 (urllib follows it for GET only)."""
    url = cluster.members[0].admin_url + path
    for _ in range(3):
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="PUT", data=b""), timeout=60).read()
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 307:
                raise
            url = exc.headers["Location"]
    raise RuntimeError(f"too many redirects for {path}")


def object_puts(cluster: LocalCluster) -> list[int]:
    """Each broker's magnetar_object_puts_total (0 on file storage)."""
    out = []
    for m in cluster.members:
        text = urllib.request.urlopen(m.admin_url + "/metrics", timeout=30).read().decode()
        found = PUTS.search(text)
        out.append(int(float(found.group(1))) if found else 0)
    return out


def commit_phases(cluster: LocalCluster) -> dict:
    """Every broker's commit phase histograms, added up:
    ``{phase: {"buckets": [(le, cumulative count)], "sum": seconds}}``."""
    out: dict = {}
    for m in cluster.members:
        text = urllib.request.urlopen(m.admin_url + "/metrics", timeout=30).read().decode()
        for kind, le, phase, value in PHASE.findall(text):
            entry = out.setdefault(phase, {"buckets": {}, "sum": 0.0})
            if kind == "sum":
                entry["sum"] += float(value)
            else:
                entry["buckets"][le] = entry["buckets"].get(le, 0) + float(value)
    return {phase: {"buckets": list(e["buckets"].items()), "sum": e["sum"]} for phase, e in out.items()}


def phase_figures(before: dict, after: dict) -> dict:
    """Per phase, over the commits between two ``commit_phases`` readings:
    count, mean and the bucket bounds holding the median and the 99th
    percentile (ms)."""
    figures = {}
    for phase, a in after.items():
        b = before.get(phase, {"buckets": [], "sum": 0.0})
        old = dict(b["buckets"])
        buckets = [(le, n - old.get(le, 0)) for le, n in a["buckets"]]
        count = buckets[-1][1] if buckets else 0
        if not count:
            continue

        def bound(q: float) -> str:
            le = next(le for le, n in buckets if n >= q * count)
            return le if le == "+Inf" else f"{float(le) * 1000:g}"

        figures[phase] = {"commits": int(count), "mean_ms": round((a["sum"] - b["sum"]) / count * 1000, 1),
                          "p50_le_ms": bound(0.5), "p99_le_ms": bound(0.99)}
    return figures


def per_broker_rate(sampler: PeriodicSampler[list[int]], begin: float, end: float) -> list[float]:
    """PUTs per second of each broker between the samples nearest inside [begin, end]."""
    span = sampler.span(begin, end)
    if span is None:
        return []
    seconds, a, b = span
    return [round((y - x) / seconds, 1) for x, y in zip(a, b)]


def produce(spec: WorkloadSpec, log, cluster: LocalCluster | None = None) -> dict:
    """One produce run; with ``cluster`` (object storage) also where the
    commits' time went during it (``commit_phases``)."""
    before = commit_phases(cluster) if cluster is not None else None
    result = run(spec, produce=True, consume=False, command=f"produce {spec.topic}")
    p = result["produce"] or {}
    lat = p.get("latency_ms") or {}
    log(f"  {spec.topic}: {p.get('msg_per_s', 0):,.0f} msg/s, publish p50 {lat.get('p50')} p99 {lat.get('p99')} "
        f"max {lat.get('max')} ms, errors {p.get('errors')} {result['errors'] or ''}")
    if before is not None:
        result["commit_phases"] = phase_figures(before, commit_phases(cluster))
        for phase, f in result["commit_phases"].items():
            log(f"    {phase:>11}: {f['commits']} commits, mean {f['mean_ms']} ms, "
                f"p50 <= {f['p50_le_ms']} ms, p99 <= {f['p99_le_ms']} ms")
    return result


def puts_under_load(cluster: LocalCluster, spec: WorkloadSpec, log) -> dict:
    """Run ``spec`` while sampling the PUT counters; rates over its steady part."""
    before = object_puts(cluster)
    with PeriodicSampler(lambda: object_puts(cluster)) as sampler:
        result = run(spec, produce=True, consume=False, command=f"produce {spec.topic}", setup_timeout=600)
        ended = time.monotonic()
    after = object_puts(cluster)
    # Entries are written only while producers send (connecting them writes
    # none): every PUT of the run falls in its produce phase.
    seconds = (result["produce"] or {}).get("seconds") or spec.duration
    rates = [round((b - a) / seconds, 1) for a, b in zip(before, after)]
    # The busiest stretch, from the samples: the runner's clock starts once
    # every producer is connected and its wall time ends at its return.
    t0 = ended - result["wall_seconds"]
    sampled = per_broker_rate(sampler, t0 + 1.0, t0 + spec.duration)
    log(f"  {spec.topics} topic(s) at {spec.rate:,.0f} msg/s: PUTs/s per broker {rates} "
        f"(sampled while sending: {sampled})")
    return {"topics": spec.topics, "rate": spec.rate, "puts_per_s_per_broker": rates,
            "sampled_puts_per_s_per_broker": sampled, "max_puts_per_s": max(rates + sampled),
            "produced": (result["produce"] or {}).get("messages"), "errors": result["errors"]}


def catch_up(cluster: LocalCluster, spec: WorkloadSpec, messages: int, log) -> dict:
    for name in spec.topic_names():
        admin_put(cluster, f"/admin/v2/persistent/{NAMESPACE}/{name}/unload")
    consumer = replace(spec, subscriptions=["catch-up"], initial_position="earliest", messages=messages,
                       duration=600, receive_mode="batch", receiver_queue=5000)
    result = run(consumer, produce=False, consume=True, command="consume catch-up")
    c = result["consume"] or {}
    log(f"  catch-up read of {messages:,} messages: {c.get('msg_per_s', 0):,.0f} msg/s "
        f"({c.get('mb_per_s')} MB/s) {result['errors'] or ''}")
    return result


def etcd_kvs(etcd_url: str) -> dict[str, int]:
    """Every key in etcd and its value's size (the JSON gateway's range),
    read page by page (one range of every key stalls a busy etcd: a broker
    lost its session to one, 2026-11-28)."""
    return dict(_pages(etcd_url, b"\0", b"\0"))


def _range(etcd_url: str, key: bytes, end: bytes, **extra) -> dict:
    body = json.dumps({"key": base64.b64encode(key).decode(), "range_end": base64.b64encode(end).decode(),
                       **extra}).encode()
    return json.loads(urllib.request.urlopen(urllib.request.Request(etcd_url + "/v3/kv/range", data=body),
                                             timeout=60).read())


def _pages(etcd_url: str, key: bytes, end: bytes, *, keys_only: bool = False, page: int = 2000):
    """``(key, value size)`` of every key in ``[key, end)``, ``page`` at a time."""
    while True:
        answer = _range(etcd_url, key, end, limit=page, keys_only=keys_only)
        kvs = answer.get("kvs", [])
        for kv in kvs:
            yield base64.b64decode(kv["key"]).decode(), len(base64.b64decode(kv.get("value", "")))
        if not answer.get("more") or not kvs:
            return
        key = base64.b64decode(kvs[-1]["key"]) + b"\0"


def _prefix_end(prefix: bytes) -> bytes:
    return prefix[:-1] + bytes([prefix[-1] + 1])


def _count(etcd_url: str, key: bytes, end: bytes) -> int:
    return int(_range(etcd_url, key, end, count_only=True).get("count", 0))


def _db_in_use(etcd_url: str) -> int:
    text = urllib.request.urlopen(etcd_url + "/metrics", timeout=30).read().decode()
    found = re.search(r"^etcd_mvcc_db_total_size_in_use_in_bytes (\S+)$", text, re.M)
    return int(float(found.group(1))) if found else 0


def etcd_per_topic(etcd_url: str, topic_prefix: str, topics: int, bytes_sample: int = 100) -> dict:
    """Keys and bytes (key + value) each topic costs in etcd: its managed
    ledger record, its cursors, and (object) its ledgers' index records.

    Cheap on a big index: keys are counted per ledger (``count_only``), the
    bytes read for ``bytes_sample`` topics (spread over all) only; the
    totals are etcd's key count and its database's size in use."""
    root = next(k[:k.index("/managed-ledgers/")] for k, _ in _pages(etcd_url, b"\0", b"\0", keys_only=True)
                if "/managed-ledgers/" in k)
    ml_prefix = f"{root}/managed-ledgers/{NAMESPACE}/persistent/".encode()
    own: dict[str, list[int]] = {}  # topic name: its record's and its cursors' sizes
    mls: dict[str, str] = {}
    for key, size in _pages(etcd_url, ml_prefix, _prefix_end(ml_prefix)):
        head, _, tail = key[len(ml_prefix):].partition("/")
        own.setdefault(head, []).append(len(key) + size)
        if not tail:
            mls[head] = key
    step = max(1, topics // max(1, bytes_sample))
    keys, sizes = [], []
    for i in range(topics):
        name = f"{topic_prefix}-{i}"
        ml = mls[name]
        count = len(own[name])
        size = sum(own[name])
        doc = json.loads(_get(etcd_url, ml))
        for ledger in doc.get("ledgers", []):
            lid = f"{root}/object-ledgers/{int(ledger['id']):020d}".encode()
            end = lid + b"0"  # the record itself and its children (``/``), no other ledger (ids are fixed-width)
            if i % step == 0:
                found = list(_pages(etcd_url, lid, end))
                count += len(found)
                size += sum(len(k) + v for k, v in found)
            else:
                count += _count(etcd_url, lid, end)
        keys.append(count)
        if i % step == 0:
            sizes.append(size)
    return {"topics": topics, "keys_max": max(keys), "keys_mean": round(sum(keys) / topics, 1),
            "bytes_max": max(sizes), "bytes_mean": round(sum(sizes) / len(sizes)), "bytes_sampled_topics": len(sizes),
            "etcd_keys_total": _count(etcd_url, b"\0", b"\0"), "etcd_db_in_use_bytes": _db_in_use(etcd_url)}


def _get(etcd_url: str, key: str) -> bytes:
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    answer = json.loads(urllib.request.urlopen(urllib.request.Request(etcd_url + "/v3/kv/range", data=body),
                                               timeout=30).read())
    return base64.b64decode(answer["kvs"][0]["value"])


def traffic(cluster: LocalCluster, spec: WorkloadSpec, minutes: float, log) -> dict:
    """``minutes`` of traffic with a subscription on every topic, then etcd's count."""
    both = replace(spec, duration=minutes * 60, subscriptions=["kept"], initial_position="earliest")
    result = run(both, produce=True, consume=True, command="e2e traffic")
    found = etcd_per_topic(cluster.etcd_url, spec.topic, spec.topics)
    found.update(minutes=minutes, produced=(result["produce"] or {}).get("messages"),
                 consumed=(result["consume"] or {}).get("messages"))
    log(f"  etcd after {minutes} min on {spec.topics} topics: keys/topic max {found['keys_max']} "
        f"mean {found['keys_mean']}, bytes/topic max {found['bytes_max']:,} mean {found['bytes_mean']:,}; "
        f"etcd holds {found['etcd_keys_total']:,} keys, its database {found['etcd_db_in_use_bytes']:,} B in use")
    return found


def measure(storage: str, args, log) -> dict:
    config = f"[storage]\nobject_commit_interval_ms = {args.commit_interval_ms}\n" if storage == "object" else None
    out: dict = {"storage": storage}
    with tempfile.TemporaryDirectory(prefix=f"magnetar-{storage}-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "cluster", brokers=args.brokers, session_ttl=10.0, storage=storage,
                               broker_config=config).start(timeout=180)
        try:
            log(f"[{storage}] {args.brokers} brokers: {', '.join(m.service_url for m in cluster.members)}")
            base = WorkloadSpec(service_url=cluster.members[0].service_url, size=100, topics=args.topics,
                                duration=args.seconds, batching=True)
            phases = cluster if storage == "object" else None
            for rate in (5_000, 20_000):
                out[f"latency_{rate}"] = produce(replace(base, topic=f"lat{rate}", rate=rate), log, phases)
            if args.latency_only:
                return out
            tput = produce(replace(base, topic="tput"), log, phases)
            out["throughput"] = tput
            if storage == "object":
                out["puts_1_topic"] = puts_under_load(
                    cluster, replace(base, topic="one", topics=1, rate=args.put_rate), log)
                out["puts_many_topics"] = puts_under_load(
                    cluster, replace(base, topic="many", topics=args.many_topics, rate=args.put_rate), log)
            produced = (tput["produce"] or {}).get("messages", 0)
            out["catch_up"] = catch_up(cluster, replace(base, topic="tput"), produced, log)
            out["etcd"] = traffic(cluster, replace(base, topic="kept", topics=args.traffic_topics,
                                                   rate=args.traffic_rate), args.traffic_minutes, log)
        finally:
            cluster.stop()
    return out


def summary(results: dict, args) -> list[str]:
    def p(r, key, sub=None):
        part = (r or {}).get("produce") or {}
        return part.get(key) if sub is None else (part.get(key) or {}).get(sub)

    lines = ["| figure | file | object |", "|---|---:|---:|"]
    f, o = results["file"], results["object"]
    for rate in (5_000, 20_000):
        for q in ("p50", "p99", "max"):
            lines.append(f"| publish {q} at {rate:,} msg/s, ms | {p(f[f'latency_{rate}'], 'latency_ms', q)} "
                         f"| {p(o[f'latency_{rate}'], 'latency_ms', q)} |")
    p99 = p(o["latency_20000"], "latency_ms", "p99")
    p99_line = f"- object p99 at 20,000 msg/s = {p99} ms (target <= 50): {'met' if p99 is not None and p99 <= 50 else 'MISSED'}"
    if args.latency_only:
        return lines + ["", "Targets:", p99_line]
    lines.append(f"| produce, msg/s (max rate, {args.topics} topics) | {p(f['throughput'], 'msg_per_s'):,.0f} "
                 f"| {p(o['throughput'], 'msg_per_s'):,.0f} |")
    for label, key in (("1 topic", "puts_1_topic"), (f"{args.many_topics} topics", "puts_many_topics")):
        lines.append(f"| PUTs/s per broker, {label} at {args.put_rate:,} msg/s (each broker) | - | "
                     f"{o[key]['puts_per_s_per_broker']} |")
    cf, co = f["catch_up"]["consume"] or {}, o["catch_up"]["consume"] or {}
    lines.append(f"| catch-up read, msg/s (cold owner) | {cf.get('msg_per_s', 0):,.0f} | {co.get('msg_per_s', 0):,.0f} |")
    for key, label in (("keys_max", "etcd keys per topic (max)"), ("keys_mean", "etcd keys per topic (mean)"),
                       ("bytes_max", "etcd bytes per topic (max)")):
        lines.append(f"| {label} after {args.traffic_minutes} min | {f['etcd'][key]:,} | {o['etcd'][key]:,} |")
    ratio = p(o["throughput"], "msg_per_s") / max(1, p(f["throughput"], "msg_per_s"))
    puts = max(o["puts_1_topic"]["max_puts_per_s"] or 0, o["puts_many_topics"]["max_puts_per_s"] or 0)
    bound = 1000 / args.commit_interval_ms
    lines += ["", "Targets:",
              f"- object throughput / file's = {ratio:.0%} (target >= 25 %): {'met' if ratio >= 0.25 else 'MISSED'}",
              p99_line,
              f"- object PUTs per broker per second, max = {puts} (target <= {bound:g}): "
              f"{'met' if puts <= bound else 'MISSED'}"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="each produce run")
    parser.add_argument("--topics", type=int, default=6, help="topics of the throughput and latency runs")
    parser.add_argument("--many-topics", type=int, default=1000)
    parser.add_argument("--put-rate", type=float, default=2000.0, help="msg/s of the PUT-counting runs")
    parser.add_argument("--traffic-minutes", type=float, default=1.0, help="10 for the issue's figure")
    parser.add_argument("--traffic-topics", type=int, default=10)
    parser.add_argument("--traffic-rate", type=float, default=2000.0)
    parser.add_argument("--brokers", type=int, default=3,
                        help="brokers of the cluster (1: the object path's latency without two more brokers "
                             "competing for the cores)")
    parser.add_argument("--commit-interval-ms", type=int, default=20, help="object_commit_interval_ms")
    parser.add_argument("--latency-only", action="store_true",
                        help="only the publish latency runs (5,000 and 20,000 msg/s), with the commit phases")
    parser.add_argument("--only", choices=["file", "object"], help="one backend (no comparison)")
    parser.add_argument("--json", help="write every raw result here")
    args = parser.parse_args()
    log = lambda line: print(line, flush=True)  # noqa: E731
    results = {s: measure(s, args, log) for s in (["file", "object"] if not args.only else [args.only])}
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    if not args.only:
        print("\n".join(summary(results, args)))


if __name__ == "__main__":
    main()
