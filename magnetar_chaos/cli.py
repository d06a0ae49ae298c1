"""``magnetar-chaos run``, ``check`` and ``fuzz`` (also ``python -m
magnetar_chaos ...``).

``run`` prints a live line per second (operations, acknowledged, faults) and
ends with the checker's table and the seed; exit code 1 when an anomaly was
found, 2 for bad arguments. ``check`` re-judges a recorded history.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from .checker import ANOMALIES, Report, check
from .faults import faults_help
from .history import read_history
from .hosts_cli import hosts_app
from .plot import write_svg

chaos_app = typer.Typer(help="Fault injection: real clients, a nemesis, and a checker of the history.",
                        no_args_is_help=True, add_completion=False)
chaos_app.add_typer(hosts_app, name="hosts")
console = Console()


def _table(report: Report, seed: int | None = None, sync_policy: str | None = None,
           storage: str | None = None) -> Table:
    table = Table(title="chaos verdict" + (f" (seed {seed})" if seed is not None else ""))
    table.add_column("measure")
    table.add_column("count", justify="right")
    if sync_policy is not None:  # a recorded history does not say it: only the run's own table shows it
        table.add_row("sync policy", sync_policy)
    if storage is not None:
        table.add_row("storage", storage)
    # The replication figures only where something was replicated (the regions topology).
    figures = ("replicated", "replicated_subscription_covers") if report.replicated else ()
    for name in ("operations", "acknowledged", "indeterminate", "received", "redelivered", "offset_reads", *figures,
                 *ANOMALIES):
        value = getattr(report, name)
        style = "red" if name in ANOMALIES and value else ""
        table.add_row(name.replace("_", " "), f"[{style}]{value}[/{style}]" if style else str(value))
        if name == "reordered":  # and per producer
            for process in sorted(report.acknowledged_by_process):
                n = report.reordered_by_process[process]
                table.add_row(f"  reordered: {process}", f"[red]{n}[/red]" if n else "0")
    for kind, n in sorted(report.faults.items()):
        table.add_row(f"faults: {kind}", str(n))
    return table


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _verdict(report: Report) -> None:
    for kind, examples in report.examples.items():
        for text in examples:
            console.print(f"[red]{kind}[/red]: {text}", highlight=False)
    if report.clean:
        console.print("[green]no anomaly[/green]")
    else:
        raise typer.Exit(1)


@chaos_app.command("run")
def run_command(
    topology: str = typer.Option("standalone", "--topology", help="standalone, cluster (3 brokers on etcd), regions (two one-broker regions replicating; workloads write to the first, the second's copy is checked) or hosts (docs/deploy.md's deployment on network namespaces: 3 brokers on object storage, a 3-member etcd, SeaweedFS split; the workloads on the client host; root)"),
    duration: float = typer.Option(60.0, "--duration", min=1, help="Seconds of faults and traffic"),
    faults: str = typer.Option("kill,pause", "--faults", help=faults_help()),
    seed: int = typer.Option(1, "--seed", help="Seeds the fault schedule and the workloads"),
    out: Path = typer.Option(Path("./chaos-out"), "--out", help="history.jsonl, report.json, broker.log"),
    interval: str = typer.Option("2,5", "--interval", help="Seconds between a heal and the next fault: MIN,MAX"),
    sync_policy: str = typer.Option("always", "--sync-policy",
                                    help="Every broker's storage sync policy: always (receipt after fdatasync) or interval (receipt after write, fdatasync every 100 ms)"),
    storage: str = typer.Option("file", "--storage",
                                help="Where the cluster's ledgers live: file (a shared directory) or object (a SeaweedFS of the run's own; --topology cluster)"),
    nemeses: int = typer.Option(1, "--nemeses", min=1, max=8,
                                help="Faults at once, each on hosts no other holds (--topology hosts; a soak's pace)"),
    session_ttl: float = typer.Option(None, "--session-ttl",
                                      help="The brokers' session in seconds, every fault's hold scaled with it (--topology hosts; default 4)"),
) -> None:
    """Run workloads against a broker while injecting faults; judge the history."""
    try:
        low, high = (float(x) for x in interval.split(","))
        if not 0 <= low <= high:
            raise ValueError
    except ValueError:
        console.print(f"[red]--interval must be MIN,MAX seconds with 0 <= MIN <= MAX, not {interval!r}[/red]")
        raise typer.Exit(2)
    from .systems import SYNC_POLICIES

    if sync_policy not in SYNC_POLICIES:
        console.print(f"[red]--sync-policy must be one of {', '.join(SYNC_POLICIES)}, not {sync_policy!r}[/red]")
        raise typer.Exit(2)
    from magnetar_harness.broker import BrokerDidNotStart
    from .runner import run

    kinds = [f for f in faults.split(",") if f]

    def progress(p) -> None:
        console.print(f"{p.elapsed:6.1f} s  ops {p.operations:>7}  acked {p.acknowledged:>7}  "
                      f"faults {p.faults:>4}", highlight=False)

    # A SIGTERM (a CI timeout, kill) unwinds like Ctrl-C: the run's brokers,
    # etcd and proxy are stopped (a paused broker resumed first), not orphaned.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        report = run(out / f"seed-{seed}", duration, kinds, seed, topology, on_progress=progress,
                     interval=(low, high), sync_policy=sync_policy, storage=storage, nemeses=nemeses,
                     session_ttl_s=session_ttl)
    except ValueError as exc:  # bad arguments, or a fault this machine cannot do (partition without root, fsync-error without ptrace, clock-jump without libfaketime)
        console.print(f"[red]{exc}[/red]", soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    except (BrokerDidNotStart, RuntimeError) as exc:
        console.print(f"[red]the run failed:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    written = out / f"seed-{seed}" / "report.json"  # the topology's own storage (hosts: object, always)
    storage = json.loads(written.read_text()).get("storage", storage) if written.exists() else storage
    console.print(_table(report, seed, sync_policy, storage))
    console.print(f"history: {out / f'seed-{seed}' / 'history.jsonl'}; latency plot: "
                  f"{out / f'seed-{seed}' / 'latency.svg'}")
    _verdict(report)


@chaos_app.command("check")
def check_command(history: Path = typer.Argument(..., exists=True, dir_okay=False, help="A history.jsonl"),
                  plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw its latency SVG here")) -> None:
    """Judge a recorded history again."""
    try:
        ops = read_history(history)
    except ValueError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(2)
    if plot is not None:
        console.print(f"latency plot: {write_svg(ops, plot)}")
    report = check(ops)
    console.print(_table(report))
    _verdict(report)


@chaos_app.command("fuzz")
def fuzz_command(
    rounds: int = typer.Option(500, "--rounds", min=1, help="Damaged conversations to play"),
    seed: int = typer.Option(1, "--seed", help="Seeds the mutations"),
    service_url: Optional[str] = typer.Option(None, "--service-url", "-u",
                                              help="A running broker (default: start a standalone one)"),
    topology: str = typer.Option("standalone", "--topology",
                                 help="What to start: standalone, or cluster (3 brokers on etcd; broker SEED % 3 "
                                      "is fuzzed, canaries on it and on the next one)"),
    out: Path = typer.Option(Path("./chaos-out/fuzz"), "--out", help="The started brokers' data and logs"),
) -> None:
    """Mutated real frames at a live broker while canary clients work; the
    broker must survive, keep serving the canaries, and not bloat."""
    from magnetar.service_urls import require_pulsar_url

    from magnetar_harness.broker import BrokerDidNotStart
    from .fuzz import fuzz, fuzz_cluster
    from .systems import ClusterSystem, StandaloneSystem

    if topology not in ("standalone", "cluster"):
        console.print(f"[red]--topology must be standalone or cluster, not {topology!r}[/red]")
        raise typer.Exit(2)
    if topology == "cluster" and service_url is not None:
        console.print("[red]--topology cluster starts its own cluster: leave out --service-url[/red]")
        raise typer.Exit(2)
    system = None
    if service_url is None:
        (out / f"seed-{seed}").mkdir(parents=True, exist_ok=True)
        system = (ClusterSystem(out / f"seed-{seed}", seed=seed) if topology == "cluster"
                  else StandaloneSystem(out / f"seed-{seed}"))
        try:
            system.start()
        except BrokerDidNotStart as exc:
            system.stop()
            console.print(f"[red]the broker did not start:[/red] {exc}", highlight=False)
            raise typer.Exit(1)
        if topology == "standalone":
            service_url = system.broker.service_url  # straight at the broker, not through the proxy
    try:
        if topology == "cluster":
            brokers = [(b.host, b.port, b.proc.pid) for b in system.brokers]
            target = seed % len(brokers)
            console.print(f"fuzzing broker-{target} of {len(brokers)}", highlight=False)
            report = fuzz_cluster(brokers, target, rounds, seed)
        else:
            try:
                hosts = require_pulsar_url(service_url)
                if len(hosts) != 1:
                    raise ValueError(f"{service_url} names {len(hosts)} brokers; fuzz damages the frames "
                                     f"of one: give --service-url one host")
            except ValueError as exc:
                console.print(f"[red]{exc}[/red]")
                raise typer.Exit(2)
            [(host, port)] = hosts
            pid = system.broker.proc.pid if system is not None and system.broker.proc is not None else None
            report = fuzz(host, port, rounds, seed, broker_pid=pid)
    finally:
        if system is not None:
            system.stop()
    console.print(f"{report.rounds} rounds; canary sent {report.canary_sent}, received {report.canary_received}"
                  + (f"; broker RSS {report.rss_before_kb} -> {report.rss_after_kb} kB" if report.rss_before_kb else "")
                  + (f"; {report.owned_by_target} of {report.topics} fuzzed topics owned by the fuzzed broker"
                     if report.owned_by_target is not None else ""),
                  highlight=False)
    for problem in report.problems:
        console.print(f"[red]{problem}[/red]", highlight=False)
    if not report.clean:
        raise typer.Exit(1)
    console.print("[green]the broker survived[/green]" if topology == "standalone"
                  else "[green]the cluster survived[/green]")


def main(args: list[str] | None = None, prog_name: str = "magnetar-chaos") -> None:
    """The tool's entry point: ``magnetar-chaos`` and ``python -m magnetar_chaos``; exits the process."""
    chaos_app(args=args, prog_name=prog_name)
