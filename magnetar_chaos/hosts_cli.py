"""``magnetar-chaos hosts up`` / ``down``: the deployment on a test bed of
hosts (:mod:`magnetar_harness.host_topology`), left running between the two
commands (``make hosts-up``, ``make hosts-down``). ``up`` prints every
part's host, address, ports and log, and writes them to ``hosts.json`` in
its directory; ``down`` stops everything in the tag's namespaces and deletes
them. Root only: a line says so otherwise (exit code 2)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

hosts_app = typer.Typer(help="Brokers, etcd, SeaweedFS and Spark on hosts of their own (network namespaces).",
                        no_args_is_help=True, add_completion=False)
console = Console()
DEFAULT_TAG = "hosts"


def _check_root() -> None:
    from magnetar_harness.hosts import unavailable_reason

    reason = unavailable_reason()
    if reason:
        console.print(f"[red]magnetar-chaos hosts:[/red] {reason}", highlight=False)
        raise typer.Exit(2)


@hosts_app.command("up")
def up(tag: str = typer.Option(DEFAULT_TAG, help="Names: namespaces mg-TAG-*, bridge mgTAGbr (1-8 of a-z0-9)"),
       directory: Optional[Path] = typer.Option(None, "--dir", help="Files and logs (default: /tmp/mg-TAG)"),
       spark: bool = typer.Option(True, "--spark/--no-spark", help="A Spark standalone master and 2 workers")) -> None:
    """Make the hosts, start every part (leftovers of this tag removed first), print where each is."""
    from magnetar_harness.host_topology import TopologyError, default_base, host_topology
    from magnetar_harness.hosts import HostsError

    _check_root()
    # `up` again replaces what `up` left running under the same tag.
    try:
        topology = host_topology(tag, directory or default_base(tag), detached=True, replace=True)
    except HostsError as exc:
        console.print(f"[red]hosts up failed:[/red] {exc}", highlight=False)
        raise typer.Exit(1)
    try:
        topology.start(spark=spark)
    except (TopologyError, HostsError, OSError, ValueError) as exc:
        topology.stop()
        console.print(f"[red]hosts up failed:[/red] {exc}", highlight=False)
        raise typer.Exit(1)
    console.print(f"hosts {tag}: subnet {topology.bed.subnet}, bridge {topology.bed.bridge}", highlight=False)
    for part in topology.describe():
        ports = ",".join(f"{k}={v}" for k, v in part["ports"].items())
        console.print(f"{part['part']:<15} host={part['namespace']} address={part['address']} ports={ports} "
                      f"log={part['log']}", highlight=False, soft_wrap=True)
    console.print(f"{'client':<15} host={topology.bed.namespace('client')} address={topology.address('client')}",
                  highlight=False, soft_wrap=True)
    console.print(f"service URL {topology.service_url}\nTLS service URL {topology.tls_service_url} "
                  f"(CA {topology.ca_file})\netcd {topology.etcd_endpoints}\nobject store {topology.object_store_url}"
                  + (f"\nspark {topology.spark_master_url}" if spark else "")
                  + f"\nrun a client there: ip netns exec {topology.bed.namespace('client')} COMMAND"
                  + f"\ndescribed in {topology.base / 'hosts.json'}; stop with: magnetar-chaos hosts down --tag {tag}",
                  highlight=False, soft_wrap=True)


@hosts_app.command("down")
def down(tag: str = typer.Option(DEFAULT_TAG, help="The tag given to up"),
         directory: Optional[Path] = typer.Option(None, "--dir", help="Files and logs, deleted (default: /tmp/mg-TAG)"),
         keep_files: bool = typer.Option(False, "--keep-files", help="Keep the files and logs")) -> None:
    """Stop every part of ``tag``, delete its namespaces and bridge (and its files)."""
    from magnetar_harness.host_topology import HOSTS, default_base
    from magnetar_harness.hosts import HostBed

    _check_root()
    bed = HostBed(tag, list(HOSTS))
    left = bed.our_namespaces()
    bed.teardown()
    base = directory or default_base(tag)
    if not keep_files and (base / "hosts.json").exists():
        shutil.rmtree(base)
    console.print(f"hosts {tag}: {len(left)} namespaces removed" + ("" if keep_files else f", {base} deleted"),
                  highlight=False)
