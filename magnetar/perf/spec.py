"""What a perf run does, and how it is split over worker processes.

A :class:`WorkloadSpec` is the whole run as the user asked for it (the
``magnetar perf`` options). :func:`plan_workers` cuts it into
:class:`WorkerPlan` s, one per process: which topics each producer or
consumer of that process serves, and its share of the rate and of the
message count. Specs and plans are plain dataclasses so they pickle into
spawned processes.

Failure modes: :meth:`WorkloadSpec.validate` raises ``ValueError`` with a
message fit for the command line (e.g. partitioned topics, which the broker
does not support yet).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

SUBSCRIPTION_TYPES = ("Exclusive", "Shared", "Failover")


@dataclass
class WorkloadSpec:
    service_url: str = "pulsar://localhost:6650"
    #: Topic name, or prefix when ``topics`` > 1 (``<topic>-0``, ``<topic>-1``, ...).
    topic: str = "perf"
    topics: int = 1
    #: Partitions per topic; 0 = non-partitioned. Magnetar has no partitioned
    #: topics yet, so validate() refuses anything else.
    partitions: int = 0
    size: int = 100
    #: Total produce rate in msg/s over all producers; 0 = as fast as possible.
    rate: float = 0.0
    #: Producers per topic.
    producers: int = 1
    #: Consumers per subscription per topic.
    consumers: int = 1
    #: One name per subscription: several names = fan-out.
    subscriptions: list[str] = field(default_factory=lambda: ["perf-sub"])
    subscription_type: str = "Exclusive"
    #: Where a new subscription starts: "latest" or "earliest" (catch-up reads).
    initial_position: str = "latest"
    batching: bool = True
    batch_max_messages: int = 1000
    batch_max_bytes: int = 128 * 1024
    batch_delay_ms: int = 1
    #: Producer-side queue (messages) before send blocks.
    max_pending: int = 10_000
    receiver_queue: int = 1000
    #: Seconds to produce (or consume, for consume-only runs); 0 = until ``messages``.
    duration: float = 10.0
    #: Total messages to produce (or to consume, for consume-only); 0 = no limit.
    messages: int = 0
    #: Producer / consumer processes; 0 = automatic.
    producer_workers: int = 0
    consumer_workers: int = 0
    #: Record the latency of one message in this many (randomised); 0 = automatic.
    sample_every: int = 0
    #: Consumers: "single" receive() (lowest latency) or "batch" batch_receive()
    #: (highest throughput); "auto" = single when producing in the same run.
    receive_mode: str = "auto"
    #: Seconds consumers may keep draining after producers stop (e2e runs).
    drain_timeout: float = 10.0
    #: Write a send timestamp into each body (set by the runner for e2e runs).
    stamp: bool = False
    #: Seconds per bucket of the sending's series by send time (:mod:`.series`;
    #: the official client's producers only); 0 = no series.
    series_s: float = 0.0
    #: A second, coarser cut of the same series (e.g. 60: per minute, exact
    #: percentiles from the samples); 0 = none. Needs ``series_s``.
    series_wide_s: float = 0.0
    #: Extra driver-specific settings (e.g. the NATS driver's stream names).
    extra: dict = field(default_factory=dict)

    def validate(self) -> "WorkloadSpec":
        if self.partitions:
            raise ValueError("perf does not create partitioned topics: create one first "
                             "(magnetar admin topics create-partitioned-topic TOPIC -p N) and give its name with "
                             "--topic; the client then spreads messages over its partitions")
        if self.size < 1:
            raise ValueError("--size must be at least 1 byte")
        if self.rate < 0:
            raise ValueError("--rate must be >= 0 (0 = max)")
        if self.topics < 1 or self.producers < 0 or self.consumers < 0:
            raise ValueError("--topics must be >= 1, --producers and --consumers >= 0")
        if self.duration <= 0 and self.messages <= 0:
            raise ValueError("give --duration or --messages (or both)")
        if self.subscription_type not in SUBSCRIPTION_TYPES:
            raise ValueError(f"--subscription-type must be one of {', '.join(SUBSCRIPTION_TYPES)}")
        if self.initial_position not in ("latest", "earliest"):
            raise ValueError("--position must be latest or earliest")
        if self.receive_mode not in ("auto", "single", "batch"):
            raise ValueError("--receive-mode must be auto, single or batch")
        if self.series_s < 0:
            raise ValueError("--series must be >= 0 seconds (0 = none)")
        if self.subscription_type == "Exclusive" and self.consumers > 1:
            raise ValueError("an Exclusive subscription takes one consumer; use Shared or Failover")
        return self

    def topic_names(self) -> list[str]:
        if self.topics == 1:
            return [self.topic]
        return [f"{self.topic}-{i}" for i in range(self.topics)]

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class WorkerPlan:
    """One worker process's share of a run."""

    index: int
    role: str  # "produce" or "consume"
    #: produce: one topic per producer; consume: (topic, subscription) per consumer.
    slots: list
    rate: float = 0.0
    messages: int = 0
    sample_every: int = 64


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _auto_sample(rate: float) -> int:
    # Each sampled send costs a Python callback under the GIL on the client's
    # I/O thread; ~2k samples/s per process is plenty for p99.9 within a run
    # and keeps the callback cost off the send loop.
    if rate <= 0:
        return 64
    return max(1, round(rate / 2000))


def plan_workers(spec: WorkloadSpec) -> tuple[list[WorkerPlan], list[WorkerPlan]]:
    """Producer plans and consumer plans for ``spec``.

    Producers are dealt round-robin to processes; each process gets the
    share of rate and message count of the producers it holds. Automatic
    process counts: one producer process per core (the official client's
    send path is single-thread bound), consumers one process per 4 consumers.
    """
    topics = spec.topic_names()
    producers = [t for t in topics for _ in range(spec.producers)]
    consumers = [(t, s) for s in spec.subscriptions for t in topics for _ in range(spec.consumers)]
    cores = os.cpu_count() or 1
    pw = spec.producer_workers or min(len(producers), cores)
    cw = spec.consumer_workers or min(len(consumers), max(1, (len(consumers) + 3) // 4))
    pw = min(pw, len(producers)) if producers else 0
    cw = min(cw, len(consumers)) if consumers else 0

    prod_plans: list[WorkerPlan] = []
    if pw:
        slots = [producers[i::pw] for i in range(pw)]
        counts = _split(spec.messages, len(producers)) if spec.messages else [0] * len(producers)
        msg_per_worker = [sum(counts[i::pw]) for i in range(pw)]
        for i in range(pw):
            rate = spec.rate * len(slots[i]) / len(producers) if spec.rate else 0.0
            sample = spec.sample_every or _auto_sample(rate)
            prod_plans.append(WorkerPlan(i, "produce", slots[i], rate, msg_per_worker[i], sample))
    cons_plans: list[WorkerPlan] = []
    if cw:
        for i in range(cw):
            rate = spec.rate * len(spec.subscriptions) / cw if spec.rate else 0.0
            cons_plans.append(WorkerPlan(i, "consume", consumers[i::cw], 0.0, 0,
                                         spec.sample_every or _auto_sample(rate)))
    return prod_plans, cons_plans
