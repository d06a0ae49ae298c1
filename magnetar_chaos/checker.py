"""Judging a history (see :mod:`.history`) against Magnetar's promises.

For every topic the history's final read gives the log as stored. Then:

- **lost**: a send the system acknowledged (``ok``) whose value is not in the log;
- **duplicated**: a value stored more than once where its send promised
  ``once`` (deduplication, idempotence, exclusive and conditional writers);
- **reordered**: a process's values stored out of the order it sent them
  (each send carries the process's sequence number ``seq``);
- **interleaved writers**: on an exclusive topic, each time a writer
  session's values resume after another session's (each session must be one
  segment of the log);
- **offset violations**: an acknowledged conditional send whose value is
  not at the offset it expected.

Sends that ended in ``info`` (unknown outcome) or ``fail`` may be absent
without counting as lost; a ``fail`` that is stored anyway counts as a
**phantom** (the system said no, and did it), unless a fault overlapped the
send (a client that lost its connection reports its pending sends as failed
without knowing their fate). A heal may give an ``aftermath`` in seconds
(a cluster's session TTL and bundle moves go on after the heal); the
fault's window extends that far. A heal ends the fault of its own process
(several nemeses may fault at once).

Reads of a topic's next offset (``next-offset`` ops: the probe asks
``get_next_offset``): each answer must count every send acknowledged, in
the region read, before the read was invoked: its offset in the final log
plus one at least (**stale reads**: a broker answering from a state older
than a receipt it or another broker already gave, a zombie owner's). A
send whose invoke names a ``region`` was made in another region than the
probe's and is left out (it reaches the probe's region by replication,
later).

A topic with acknowledged sends and no final read is reported as unread:
nothing about it can be judged, and the report is not clean.

Consumers' ``receive`` ops, per subscription (or reader): every
acknowledged send of a topic a subscription read must have reached it
(**missed by consumers**); messages received more than once are counted
(**redelivered**: at-least-once delivery allows them). Where the receive ops
promise an order, the *first* receipt of each message is judged
(**delivered out of order**): ``per-producer`` (Failover, Key_Shared with one
key) wants each producer's messages in the order it sent them; ``log`` (a
reader) wants the stored log from its start, each entry after the one before
it, no gap.

Replicas (the ``regions`` topology): a ``replica-read`` op gives a topic's
log as another region stores it (its ``region``), read once the source's
replicator had drained. Against the source region's final read:

- **not replicated**: a value acknowledged, or stored, in the source region
  that is absent from the replica;
- **duplicated by replication**: a value stored more times in the replica
  than in the source (at least once counts as once): the replicator's
  resends after a fault must be deduplicated by the remote;
- **replicated out of order**: a producer's values in the replica out of the
  order the source stored them in (each value at its first appearance).

A topic with acknowledged sends and no replica read, in a history that has
replica reads, is unread.

A ``replica-subscription`` op gives a replicated subscription's
mark-delete position in the replica (``mark_delete``, ``"ledger:entry"``
in the replica's log, whose ``replica-read`` entries carry their position
third): every value the replica holds at or before it must have been
received by that subscription in the source region, else a consumer
failing over would skip it (**replicated subscription ahead**). The
values it covers are counted (**replicated subscription covers**).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

ANOMALIES = ("lost", "duplicated", "reordered", "interleaved_writers", "offset_violations", "phantoms",
             "unread_topics", "missed_by_consumers", "delivered_out_of_order", "not_replicated",
             "duplicated_by_replication", "replicated_out_of_order", "replicated_subscription_ahead", "stale_reads")


@dataclass
class Report:
    operations: int = 0
    acknowledged: int = 0
    indeterminate: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    interleaved_writers: int = 0
    offset_violations: int = 0
    phantoms: int = 0
    unread_topics: int = 0
    #: Acknowledged sends a consumer of the topic never received.
    missed_by_consumers: int = 0
    #: First receipts out of the order the subscription or reader promises.
    delivered_out_of_order: int = 0
    #: Messages consumers received more than once (at-least-once: counted, not wrong).
    redelivered: int = 0
    received: int = 0
    #: Acknowledged or stored in the source region, absent from a replica.
    not_replicated: int = 0
    #: Extra copies in a replica beyond what the source stores.
    duplicated_by_replication: int = 0
    #: A producer's values in a replica out of the order the source stored them in.
    replicated_out_of_order: int = 0
    #: Values found in the replicas (a figure, not an anomaly).
    replicated: int = 0
    #: Values in a replica before its copy of a replicated subscription's
    #: mark-delete position that the subscription never received in the source.
    replicated_subscription_ahead: int = 0
    #: Values a replicated subscription's copy covers (a figure).
    replicated_subscription_covers: int = 0
    #: Next-offset reads answered, and those older than a receipt given before they were asked.
    offset_reads: int = 0
    stale_reads: int = 0
    faults: Counter = field(default_factory=Counter)
    reordered_by_process: Counter = field(default_factory=Counter)
    acknowledged_by_process: Counter = field(default_factory=Counter)
    #: A few examples per anomaly, to start the investigation from.
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    @property
    def clean(self) -> bool:
        return all(getattr(self, name) == 0 for name in ANOMALIES)

    def _example(self, kind: str, text: str) -> None:
        if len(self.examples[kind]) < 5:
            self.examples[kind].append(text)

    def as_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in ("operations", "acknowledged", "indeterminate", "received",
                                                      "redelivered", "replicated", "replicated_subscription_covers",
                                                      "offset_reads", *ANOMALIES)}
        out["faults"] = dict(self.faults)
        out["reordered_by_process"] = dict(self.reordered_by_process)
        out["acknowledged_by_process"] = dict(self.acknowledged_by_process)
        out["examples"] = {k: v for k, v in self.examples.items() if v}
        out["clean"] = self.clean
        return out


def check(ops: list[dict[str, Any]]) -> Report:
    report = Report()
    invokes: dict[tuple[str, str], dict] = {}  # (topic, value) -> the invoke
    outcome: dict[tuple[str, str], dict] = {}  # (topic, value) -> the ok/fail/info
    logs: dict[str, list[tuple[int | None, str]]] = {}
    replicas: dict[tuple[str, str], list[str]] = {}  # (topic, region) -> the values as that region stores them
    behind: dict[tuple[str, str], float] = {}  # (topic, region) -> seconds waited for a replica that never caught up
    replica_positions: dict[tuple[str, str], list[tuple[str, str]]] = {}  # -> [(value, "ledger:entry")]
    replica_subscriptions: list[dict] = []
    # (topic, subscription) -> value -> times it was received; and the values in first-receipt order.
    receipts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    first_receipts: dict[tuple[str, str], list[str]] = defaultdict(list)
    promised_order: dict[tuple[str, str], str | None] = {}
    faults: list[list[float]] = []  # [start, end] of each fault, open until healed
    open_fault: dict[str | None, list[float]] = {}  # nemesis -> its fault not healed yet
    # topic -> values acknowledged in the probe's region, in the order of their receipts
    acked_here: dict[str, list[str]] = defaultdict(list)
    asked: dict[tuple[str, str], int] = {}  # (probe, topic) -> how many acked_here[topic] when invoked
    offset_reads: list[tuple[str, int, int]] = []  # (topic, acked_here count at invoke, answer)
    for op in ops:
        f, kind = op.get("f"), op.get("type")
        if f == "fault" and kind == "info":
            faults.append([op.get("time", 0.0), float("inf")])
            open_fault[op.get("process")] = faults[-1]
        elif f == "heal" and open_fault.get(op.get("process")) is not None:
            # A cluster's reaction to a fault (sessions lapsing, bundles moving,
            # ledgers fenced) goes on for a while after the heal: its aftermath.
            # (Each nemesis heals its own fault: several may overlap.)
            open_fault.pop(op.get("process"))[1] = op.get("time", 0.0) + float(op.get("aftermath", 0.0))
        if f == "receive" and kind == "ok":
            key = (op.get("topic"), op.get("subscription", ""))
            got = receipts[key]
            if got[op.get("value")] == 0:
                first_receipts[key].append(op.get("value"))
            got[op.get("value")] += 1
            promised_order[key] = op.get("order")
            continue
        if f == "fault":
            if kind == "info":
                report.faults[str(op.get("value"))] += 1
            continue
        if f == "read" and kind == "ok":
            logs[op["topic"]] = [(entry[0], entry[1]) for entry in op.get("log", [])]
            continue
        if f == "replica-read" and kind == "ok":
            key = (op["topic"], str(op.get("region", "")))
            replicas[key] = [entry[1] for entry in op.get("log", [])]
            if op.get("caught_up") is False:
                behind[key] = float(op.get("waited_s") or 0)
            replica_positions[key] = [(entry[1], entry[2]) for entry in op.get("log", []) if len(entry) > 2]
            continue
        if f == "replica-subscription" and kind == "ok":
            replica_subscriptions.append(op)
            continue
        if f == "next-offset":
            probe = (op.get("process"), op.get("topic"))
            if kind == "invoke":
                asked[probe] = len(acked_here[op.get("topic")])
            elif kind == "ok" and probe in asked:
                offset_reads.append((op["topic"], asked.pop(probe), int(op["next_offset"])))
            continue
        if f != "send":
            continue
        key = (op.get("topic"), op.get("value"))
        if kind == "invoke":
            report.operations += 1
            invokes[key] = op
        elif kind in ("ok", "fail", "info"):
            outcome[key] = op
            if kind == "ok" and "region" not in invokes.get(key, {}):
                acked_here[key[0]].append(key[1])
    for key, op in outcome.items():
        if op["type"] == "ok":
            report.acknowledged += 1
            report.acknowledged_by_process[op.get("process", "")] += 1
        elif op["type"] == "info":
            report.indeterminate += 1
    for key in invokes:
        if key not in outcome:
            report.indeterminate += 1  # the run ended while it was in flight

    acked_topics = {topic for (topic, _), op in outcome.items() if op["type"] == "ok"}
    for topic in sorted(acked_topics - logs.keys()):
        report.unread_topics += 1
        report._example("unread_topics", topic)
    for region in sorted({region for _, region in replicas}):
        for topic in sorted(acked_topics - {t for t, r in replicas if r == region}):
            report.unread_topics += 1
            report._example("unread_topics", f"{topic} (its replica in {region})")

    # A refusal reported while the broker was being killed or paused may be
    # the client's verdict on a send whose fate it never heard: unknown, not "no".
    for key, op in outcome.items():
        invoke = invokes.get(key)
        if op["type"] == "fail" and invoke is not None and any(
                start <= op.get("time", 0.0) and invoke.get("time", 0.0) <= end for start, end in faults):
            op["may_exist"] = True
    for topic, log in logs.items():
        _check_topic(report, topic, log, invokes, outcome)
    for (topic, region), replica in sorted(replicas.items()):
        _check_replica(report, topic, region, [value for _, value in logs.get(topic, [])], replica, outcome,
                       behind.get((topic, region)))
    for (topic, subscription), got in receipts.items():
        report.received += sum(got.values())
        report.redelivered += sum(n - 1 for n in got.values() if n > 1)
        for (t, value), op in outcome.items():
            if t == topic and op["type"] == "ok" and got[value] == 0:
                report.missed_by_consumers += 1
                report._example("missed_by_consumers",
                                f"{topic} ({subscription}): {value} acknowledged, never delivered")
        order = promised_order.get((topic, subscription))
        if order is not None:
            _check_delivery_order(report, topic, subscription, order, first_receipts[(topic, subscription)],
                                  logs.get(topic), invokes)
    for op in replica_subscriptions:
        _check_replicated_subscription(report, op, replica_positions.get((op["topic"], str(op.get("region", "")))),
                                       receipts.get((op["topic"], op.get("subscription", "")), Counter()))
    _check_offset_reads(report, offset_reads, acked_here, logs)
    return report


def _check_offset_reads(report: Report, reads: list[tuple[str, int, int]], acked_here: dict[str, list[str]],
                        logs: dict[str, list[tuple[int | None, str]]]) -> None:
    """Each ``(topic, n, answer)``: ``answer`` must be past the stored
    offset of each of the first ``n`` values acknowledged on ``topic``
    (those not in the final log are lost, judged apart)."""
    floors: dict[str, list[tuple[int, str | None]]] = {}  # topic -> prefix maxima: (offset + 1, whose)
    for topic, acked in acked_here.items():
        offset_of: dict[str, int] = {}
        for offset, value in logs.get(topic, []):
            if offset is not None:
                offset_of.setdefault(value, offset)
        prefix, best = [(0, None)], (0, None)
        for value in acked:
            at = offset_of.get(value)
            if at is not None and at + 1 > best[0]:
                best = (at + 1, value)
            prefix.append(best)
        floors[topic] = prefix
    for topic, n, answer in reads:
        report.offset_reads += 1
        floor, value = floors[topic][n] if topic in floors else (0, None)
        if answer < floor:
            report.stale_reads += 1
            report._example("stale_reads", f"{topic}: next offset {answer} read after {value} had been "
                                           f"acknowledged at offset {floor - 1}")


def _position(text: str) -> tuple[int, int]:
    ledger, _, entry = str(text).partition(":")
    return int(ledger), int(entry)


def _check_replicated_subscription(report: Report, op: dict, positions: list[tuple[str, str]] | None,
                                   received: Counter) -> None:
    """Every value of the replica at or before the subscription copy's
    mark-delete position was received by the subscription in the source."""
    if op.get("mark_delete") is None or not positions:
        return  # no copy yet (no snapshot completed), or no replica read to place it in
    topic, subscription, region = op["topic"], op.get("subscription", ""), op.get("region", "")
    mark = _position(op["mark_delete"])
    for value, at in positions:
        if _position(at) > mark:
            continue
        report.replicated_subscription_covers += 1
        if received[value] == 0:
            report.replicated_subscription_ahead += 1
            report._example("replicated_subscription_ahead",
                            f"{topic} ({subscription}): {value} at {at} is behind {region}'s copy of the "
                            f"subscription ({op['mark_delete']}) but was never received here")


def _check_delivery_order(report: Report, topic: str, subscription: str, order: str, firsts: list[str],
                          log: list[tuple[int | None, str]] | None, invokes: dict) -> None:
    if order == "per-producer":
        for process, seq, after in _behind_their_producer(topic, firsts, invokes):
            report.delivered_out_of_order += 1
            report._example("delivered_out_of_order",
                            f"{topic} ({subscription}): {process} #{seq} first received after #{after}")
    elif order == "log" and log is not None:
        index: dict[str, int] = {}  # each value's place among the log's distinct values
        for _, value in log:
            index.setdefault(value, len(index))
        expected = 0
        for value in firsts:
            at = index.get(value)
            if at is None:
                continue  # not stored (a read of what was trimmed cannot happen: retention is infinite)
            if at != expected:
                report.delivered_out_of_order += 1
                report._example("delivered_out_of_order",
                                f"{topic} ({subscription}): read {value} (log entry {at}) when entry {expected} was next")
            expected = max(expected, at + 1)


def _check_topic(report: Report, topic: str, log: list[tuple[int | None, str]],
                 invokes: dict, outcome: dict) -> None:
    stored = Counter(value for _, value in log)
    # Lost and phantoms.
    for (t, value), op in outcome.items():
        if t != topic:
            continue
        if op["type"] == "ok" and stored[value] == 0:
            report.lost += 1
            report._example("lost", f"{topic}: {value} (acknowledged at {op.get('time')} s)")
        elif op["type"] == "fail" and stored[value] > 0 and not op.get("may_exist"):
            report.phantoms += 1
            report._example("phantoms", f"{topic}: {value} refused ({op.get('error')}) but stored")
    # Duplicates where promised once.
    for value, count in stored.items():
        invoke = invokes.get((topic, value))
        if count > 1 and invoke is not None and invoke.get("promise") == "once":
            report.duplicated += count - 1
            report._example("duplicated", f"{topic}: {value} stored {count} times")
    # Order per process.
    for process, seq, after in _behind_their_producer(topic, [value for _, value in log], invokes):
        report.reordered += 1
        report.reordered_by_process[process] += 1
        report._example("reordered", f"{topic}: {process} #{seq} stored after #{after}")
    # One segment per exclusive writer session.
    sessions: list[str] = []
    for _, value in log:
        invoke = invokes.get((topic, value))
        if invoke is None or not invoke.get("exclusive"):
            continue
        session = invoke.get("session", invoke["process"])
        if not sessions or sessions[-1] != session:
            sessions.append(session)
    seen: set[str] = set()
    for session in sessions:
        if session in seen:
            report.interleaved_writers += 1
            report._example("interleaved_writers", f"{topic}: session {session} wrote again after another")
        seen.add(session)
    # Conditional publish: acknowledged at the offset it expected.
    at_offset = {offset: value for offset, value in log if offset is not None}
    for (t, value), op in outcome.items():
        invoke = invokes.get((t, value))
        if t != topic or op["type"] != "ok" or invoke is None or invoke.get("expected_offset") is None:
            continue
        expected = invoke["expected_offset"]
        if at_offset.get(expected) != value:
            report.offset_violations += 1
            report._example("offset_violations",
                            f"{topic}: {value} acknowledged at offset {expected}, stored: {at_offset.get(expected)!r}")


def _check_replica(report: Report, topic: str, region: str, source: list[str], replica: list[str],
                   outcome: dict, waited_s: float | None = None) -> None:
    """``replica`` (the values of ``topic`` as ``region`` stores them) against
    ``source`` (the source region's final read) and the acknowledgements;
    ``waited_s`` is set if the replica was read after waiting that long for
    a replication backlog that never drained (a stuck replicator, not a loss
    in transit: the examples say which)."""
    stuck = "" if waited_s is None else f"; the backlog towards {region} was not drained after {waited_s:.0f} s"
    report.replicated += len(replica)
    in_source, in_replica = Counter(source), Counter(replica)
    acked = [value for (t, value), op in outcome.items() if t == topic and op["type"] == "ok"]
    for value in dict.fromkeys(source + acked):  # each once, source order first
        if in_replica[value] == 0:
            report.not_replicated += 1
            report._example("not_replicated", f"{topic}: {value} "
                            f"({'stored' if in_source[value] else 'acknowledged'} here, not in {region}{stuck})")
    for value, count in in_replica.items():
        extra = count - max(in_source[value], 1)
        if extra > 0:
            report.duplicated_by_replication += extra
            report._example("duplicated_by_replication",
                            f"{topic}: {value} stored {count} times in {region}, {in_source[value]} here")
    # Each producer's values (``<process>:<seq>``) in the source's order: a
    # value the replica has before one the source stored ahead of it is out.
    place = {value: at for at, value in enumerate(dict.fromkeys(source))}
    furthest: dict[str, tuple[int, str]] = {}
    for value in dict.fromkeys(replica):
        at = place.get(value)
        if at is None:
            continue  # not in the source's log: judged (if acknowledged) as the source's loss
        producer = value.rsplit(":", 1)[0]
        ahead = furthest.get(producer)
        if ahead is not None and at < ahead[0]:
            report.replicated_out_of_order += 1
            report._example("replicated_out_of_order", f"{topic}: {value} after {ahead[1]} in {region}, "
                                                       f"stored before it here")
        else:
            furthest[producer] = (at, value)


def _behind_their_producer(topic: str, values: list[str], invokes: dict) -> list[tuple[str, int, int]]:
    """``(process, seq, highest seq before it)`` for each value, at its first
    appearance in ``values``, that comes after a later one of the same
    producer (a repeat is a duplicate, judged apart, not a reordering)."""
    out = []
    last_seq: dict[str, int] = {}
    seen: set[str] = set()
    for value in values:
        if value in seen:
            continue
        seen.add(value)
        invoke = invokes.get((topic, value))
        if invoke is None or "seq" not in invoke:
            continue
        process, seq = invoke["process"], invoke["seq"]
        if seq < last_seq.get(process, -1):
            out.append((process, seq, last_seq[process]))
        last_seq[process] = max(seq, last_seq.get(process, -1))
    return out
