"""``magnetar perf produce | consume | e2e | sink``: the typer sub-app.

Options follow ``pulsar-perf``. Every command prints a progress line per
second and a summary (msg/s, MB/s, latency percentiles from an HDR
histogram); ``--json PATH`` saves the full result. ``produce`` and ``e2e``
also measure the load generator's ceiling against a no-op sink first
(``--ceiling 0`` skips it). ``--driver raw`` (``produce``, ``e2e``) makes
the producers :mod:`.raw_driver`'s instead of the official client's, for
the run and its ceiling; consumers always use the official client.

Exit codes: 0 success; 1 the run had errors (or measured nothing);
2 bad options.
"""
from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console

from magnetar.service_urls import require_broker

from .spec import WorkloadSpec

#: ``--driver`` values: the module whose ``produce`` (and ``consume``) the workers run.
DRIVERS = {"pulsar": "magnetar.perf.pulsar_driver", "raw": "magnetar.perf.raw_driver"}

app = typer.Typer(help="Load generation and measurement (official pulsar-client, several processes).",
                  no_args_is_help=True, add_completion=False)
# Wide enough for the summary table when stderr is a pipe (rich would use 80).
out = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 132)

Url = Annotated[str, typer.Option("--service-url", "-u", envvar="MAGNETAR_SERVICE_URL", help="Broker URL")]
Topic = Annotated[str, typer.Option("--topic", "-t", help="Topic name (prefix when --topics > 1)")]
Topics = Annotated[int, typer.Option("--topics", help="Number of topics")]
Partitions = Annotated[int, typer.Option("--partitions", help="Not created by perf: make a partitioned topic "
                                                               "with `admin topics create-partitioned-topic`")]
Size = Annotated[int, typer.Option("--size", "-s", help="Message size in bytes")]
Rate = Annotated[float, typer.Option("--rate", "-r", help="Total publish rate in msg/s; 0 = max")]
Batching = Annotated[bool, typer.Option("--batching/--no-batching", help="Producer batching")]
BatchMsgs = Annotated[int, typer.Option("--batch-max-messages", help="Messages per batch at most")]
BatchBytes = Annotated[int, typer.Option("--batch-max-bytes", help="Bytes per batch at most")]
BatchDelay = Annotated[int, typer.Option("--batch-delay-ms", help="Max wait to fill a batch (ms)")]
MaxPending = Annotated[int, typer.Option("--max-pending", help="Producer queue (messages) before send blocks")]
Producers = Annotated[int, typer.Option("--producers", "-p", help="Producers per topic")]
Consumers = Annotated[int, typer.Option("--consumers", "-c", help="Consumers per subscription per topic")]
Subs = Annotated[Optional[list[str]], typer.Option("--subscription", "-S",
                                                   help="Subscription name; repeat for fan-out [perf-sub]")]
SubCount = Annotated[int, typer.Option("--subscriptions", help="Number of subscriptions (names <sub>-0..N-1) "
                                                                "when --subscription is not repeated")]
SubType = Annotated[str, typer.Option("--subscription-type", help="Exclusive, Shared or Failover")]
Position = Annotated[str, typer.Option("--position", help="Where new subscriptions start: latest or earliest")]
Duration = Annotated[float, typer.Option("--duration", "-d", help="Seconds to run; 0 = until --messages")]
Messages = Annotated[int, typer.Option("--messages", "-m", help="Messages to send (consume: to receive); 0 = no limit")]
PWorkers = Annotated[int, typer.Option("--producer-workers", help="Producer processes; 0 = one per core")]
CWorkers = Annotated[int, typer.Option("--consumer-workers", help="Consumer processes; 0 = automatic")]
Sample = Annotated[int, typer.Option("--sample-every", help="Record latency of 1 message in N; 0 = automatic")]
ReceiveMode = Annotated[str, typer.Option("--receive-mode", help="auto, single (receive) or batch (batch_receive)")]
Json = Annotated[Optional[str], typer.Option("--json", help="Save the full result as JSON here")]
Ceiling = Annotated[float, typer.Option("--ceiling", help="Seconds against a no-op sink to measure the "
                                                          "generator's own limit; 0 = skip")]
Driver = Annotated[str, typer.Option("--driver", help="Producers: pulsar (the official client) or raw "
                                                       "(whole batches encoded by magnetar, no per-message work)")]
BrokerPid = Annotated[Optional[int], typer.Option("--broker-pid", help="Report this broker process's CPU and RSS")]


def _spec(url, topic, topics, partitions, size, rate, batching, batch_max_messages, batch_max_bytes,
          batch_delay_ms, max_pending, producers, consumers, subscription, subscriptions, subscription_type,
          position, duration, messages, producer_workers, consumer_workers, sample_every,
          receive_mode) -> WorkloadSpec:
    names = list(subscription or [])
    if not names:
        names = ["perf-sub"] if subscriptions <= 1 else [f"perf-sub-{i}" for i in range(subscriptions)]
    elif len(names) == 1 and subscriptions > 1:
        names = [f"{names[0]}-{i}" for i in range(subscriptions)]
    spec = WorkloadSpec(
        service_url=url, topic=topic, topics=topics, partitions=partitions, size=size, rate=rate,
        producers=producers, consumers=consumers, subscriptions=names, subscription_type=subscription_type,
        initial_position=position, batching=batching, batch_max_messages=batch_max_messages,
        batch_max_bytes=batch_max_bytes, batch_delay_ms=batch_delay_ms, max_pending=max_pending,
        duration=duration, messages=messages, producer_workers=producer_workers,
        consumer_workers=consumer_workers, sample_every=sample_every, receive_mode=receive_mode,
    )
    try:
        spec = spec.validate()
        # A wrong URL or no broker is said at once, not after the run's timeout.
        require_broker(url)
        return spec
    except ValueError as exc:
        out.print(f"[red]{exc}[/red]", highlight=False, soft_wrap=True)
        raise typer.Exit(2)


def _driver(name: str) -> str:
    if name not in DRIVERS:
        out.print(f"[red]--driver must be one of {', '.join(DRIVERS)}[/red]")
        raise typer.Exit(2)
    return DRIVERS[name]


def _go(spec: WorkloadSpec, command: str, produce: bool, consume: bool, json_path, ceiling: float,
        broker_pid, driver: str = "pulsar") -> None:
    from .ceiling import measure_ceiling
    from .output import print_summary, save_json
    from .runner import run

    module = _driver(driver)
    out.print(f"magnetar perf {command}: {spec.service_url} topic(s) {', '.join(spec.topic_names())}, "
              f"{spec.size} B, rate {'max' if not spec.rate else f'{spec.rate:,.0f} msg/s'}, "
              f"batching {'on' if spec.batching else 'off'}"
              + (f", producers: {driver} driver" if produce else ""), highlight=False)
    ceiling_result = None
    if produce and ceiling > 0:
        out.print(f"measuring the load generator's ceiling against a no-op sink ({ceiling:g} s)...")
        ceiling_result = measure_ceiling(spec, ceiling, driver=module)
    try:
        result = run(spec, produce=produce, consume=consume, driver=module, console=out, broker_pid=broker_pid,
                     command=command)
    except (RuntimeError, ValueError) as exc:
        out.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1)
    result["ceiling"] = ceiling_result
    print_summary(result, out)
    if json_path:
        save_json(result, json_path)
        out.print(f"saved {json_path}")
    moved = sum((result[k] or {}).get("messages", 0) for k in ("produce", "consume"))
    if result["errors"] or moved == 0:
        raise typer.Exit(1)


@app.command()
def produce(
    service_url: Url = "pulsar://localhost:6650", topic: Topic = "perf", topics: Topics = 1,
    partitions: Partitions = 0, size: Size = 100, rate: Rate = 0.0, batching: Batching = True,
    batch_max_messages: BatchMsgs = 1000, batch_max_bytes: BatchBytes = 128 * 1024, batch_delay_ms: BatchDelay = 1,
    max_pending: MaxPending = 10_000, producers: Producers = 1, duration: Duration = 10.0, messages: Messages = 0,
    producer_workers: PWorkers = 0, sample_every: Sample = 0, json: Json = None, ceiling: Ceiling = 3.0,
    broker_pid: BrokerPid = None, driver: Driver = "pulsar",
) -> None:
    """Publish as fast as possible (or at --rate); report msg/s, MB/s and publish latency."""
    spec = _spec(service_url, topic, topics, partitions, size, rate, batching, batch_max_messages,
                 batch_max_bytes, batch_delay_ms, max_pending, producers, 0, None, 1, "Exclusive", "latest",
                 duration, messages, producer_workers, 0, sample_every, "auto")
    _go(spec, "produce", True, False, json, ceiling, broker_pid, driver)


@app.command()
def consume(
    service_url: Url = "pulsar://localhost:6650", topic: Topic = "perf", topics: Topics = 1,
    partitions: Partitions = 0, consumers: Consumers = 1, subscription: Subs = None, subscriptions: SubCount = 1,
    subscription_type: SubType = "Exclusive", position: Position = "earliest", duration: Duration = 10.0,
    messages: Messages = 0, consumer_workers: CWorkers = 0, sample_every: Sample = 0,
    receive_mode: ReceiveMode = "auto", json: Json = None, broker_pid: BrokerPid = None,
) -> None:
    """Receive and acknowledge; report msg/s, MB/s and end-to-end latency of stamped messages."""
    spec = _spec(service_url, topic, topics, partitions, 100, 0.0, True, 1000, 128 * 1024, 1, 10_000, 0,
                 consumers, subscription, subscriptions, subscription_type, position, duration, messages, 0,
                 consumer_workers, sample_every, receive_mode)
    _go(spec, "consume", False, True, json, 0, broker_pid)


@app.command()
def e2e(
    service_url: Url = "pulsar://localhost:6650", topic: Topic = "perf", topics: Topics = 1,
    partitions: Partitions = 0, size: Size = 100, rate: Rate = 10_000.0, batching: Batching = True,
    batch_max_messages: BatchMsgs = 1000, batch_max_bytes: BatchBytes = 128 * 1024, batch_delay_ms: BatchDelay = 1,
    max_pending: MaxPending = 10_000, producers: Producers = 1, consumers: Consumers = 1,
    subscription: Subs = None, subscriptions: SubCount = 1, subscription_type: SubType = "Exclusive",
    duration: Duration = 10.0, messages: Messages = 0, producer_workers: PWorkers = 0,
    consumer_workers: CWorkers = 0, sample_every: Sample = 0, receive_mode: ReceiveMode = "auto",
    json: Json = None, ceiling: Ceiling = 3.0, broker_pid: BrokerPid = None, driver: Driver = "pulsar",
) -> None:
    """Produce and consume in one run; report publish and end-to-end (send→receive) latency."""
    spec = _spec(service_url, topic, topics, partitions, size, rate, batching, batch_max_messages,
                 batch_max_bytes, batch_delay_ms, max_pending, producers, consumers, subscription, subscriptions,
                 subscription_type, "latest", duration, messages, producer_workers, consumer_workers,
                 sample_every, receive_mode)
    _go(spec, "e2e", True, True, json, ceiling, broker_pid, driver)


@app.command()
def sink(port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1; 0 = a free one")] = 0) -> None:
    """Run the no-op Pulsar sink (answers every SEND at once, stores nothing) until killed."""
    from .sink import serve

    serve(port=port)
