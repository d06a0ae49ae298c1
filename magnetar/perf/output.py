"""Human-readable output of a perf result (rich), and saving it as JSON."""
from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table


def save_json(result: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def _fmt(v) -> str:
    """Latencies: 3 significant-ish digits; None: a dash."""
    if v is None:
        return "-"
    return f"{v:,.3f}" if v < 10 else f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def _pct(v) -> str:
    return "?" if v is None else f"{v:.0f}"


def print_summary(result: dict, console) -> None:
    table = Table(title=f"magnetar perf {result['command']}".strip(), show_edge=False)
    for col in ("", "messages", "msg/s", "MB/s", "errors", "p50 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms"):
        table.add_column(col, justify="right" if col else "left")
    for name, label in (("produce", "publish (send→receipt)"), ("consume", "end-to-end (send→receive)")):
        side = result.get(name)
        if not side:
            continue
        lat = side["latency_ms"]
        table.add_row(label, f"{side['messages']:,}", f"{side['msg_per_s']:,.0f}", f"{side['mb_per_s']:.2f}",
                      f"{side['errors']:,}", *(_fmt(lat[k]) for k in ("p50", "p95", "p99", "p99.9", "max")))
    console.print(table)
    gen = result["generator"]
    cpu = ", ".join(f"{c:.0f}%" for c in gen["producer_cpu_percent"] + gen["consumer_cpu_percent"])
    console.print(f"load generator: {gen['producer_workers']} producer + {gen['consumer_workers']} consumer "
                  f"process(es), CPU per process [{cpu}] (100% = one core), machine busy "
                  f"{_pct(gen['machine_busy_percent'])}%"
                  + ("  [yellow]saturated: figures are a lower bound for the broker[/yellow]"
                     if gen["saturated"] else ""), highlight=False)
    if result.get("broker"):
        b = result["broker"]
        per = (f", {b['cpu_us_per_message']:.2f} µs of CPU per message"
               + (" (= per entry: no batching)" if "cpu_us_per_entry" in b else "")
               if b.get("cpu_us_per_message") else "")
        console.print(f"broker pid {b['pid']}: CPU {_pct(b['cpu_percent'])}% of a core{per}, "
                      f"RSS {_pct(b['rss_mb'])} MB", highlight=False)
    ceiling = result.get("ceiling")
    if ceiling:
        note = " (the sink was saturated: a lower bound)" if ceiling["sink_bound"] else ""
        console.print(f"load generator ceiling (same producers against a no-op sink, {ceiling['seconds']:g} s): "
                      f"[bold]{ceiling['msg_per_s']:,.0f}[/bold] msg/s, {ceiling['mb_per_s']:.2f} MB/s{note}",
                      highlight=False)
    for err in result["errors"]:
        console.print(f"[red]error:[/red] {err}", highlight=False)
